package shimpy

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notConfigured is what a script's helper call says when the shim found
// no whole, well-formed run configuration on its socket.
const notConfigured = "exec_tools is not configured for this cell\n"

// probeUnconfigured calls text() and reports the failure, whether the
// configuration's fd is still open and what the bridge holds.
const probeUnconfigured = `
import os, exec_tools
try:
    text("x")
except ToolError as e:
    print(e)
try:
    os.fstat(3)
    print("fd 3 still open")
except OSError:
    pass
if exec_tools._BRIDGE is not None:
    print("bridge:", exec_tools._BRIDGE.dir, exec_tools._BRIDGE.token)
`

// Whatever a per-call run's socket holds that is not one whole
// configuration of this protocol (cut anywhere, a field too many, another
// version, a token that is not base64url, a directory that is not this
// user's private directory, a bell on the configuration's own fd) leaves
// the bridge unconfigured: the helpers say so, nothing is written, and the
// socket is closed all the same.
func TestAForgedOrCutRunConfigLeavesTheBridgeUnconfigured(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	good, err := RunConfig{Token: testToken, Dir: s.rpc}.encode()
	require.NoError(t, err)
	link := filepath.Join(s.work, "rpc-link")
	require.NoError(t, os.Symlink(s.rpc, link))
	file := filepath.Join(s.work, "rpc-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	open := s.newRPCDir(t, "rpc-open")
	require.NoError(t, os.Chmod(open, 0o755))
	config := func(fields ...string) []byte { return []byte(strings.Join(fields, "\x00") + "\x00") }
	for name, payload := range map[string][]byte{
		"empty":                 {},
		"cut before the last":   good[:len(good)-1],
		"cut in the dir":        good[:len(good)-len(s.rpc)/2],
		"a field too many":      append(append([]byte{}, good...), "x\x00"...),
		"trailing bytes":        append(append([]byte{}, good...), 'x'),
		"another version":       config("exec_tools run 2", testToken, s.rpc, ""),
		"no magic":              config(testToken, s.rpc, "", ""),
		"empty token":           config(runMagic, "", s.rpc, ""),
		"token with a space":    config(runMagic, "tok en", s.rpc, ""),
		"token not ASCII":       config(runMagic, "tök", s.rpc, ""),
		"token too long":        config(runMagic, strings.Repeat("t", maxRunToken+1), s.rpc, ""),
		"relative dir":          config(runMagic, testToken, "rpc-0123456789", ""),
		"dir through a symlink": config(runMagic, testToken, link, ""),
		"dir a file":            config(runMagic, testToken, file, ""),
		"dir others can open":   config(runMagic, testToken, open, ""),
		"dir missing":           config(runMagic, testToken, s.rpc+"-gone", ""),
		"one bell":              config(runMagic, testToken, s.rpc, "4"),
		"a bell on its own fd":  config(runMagic, testToken, s.rpc, "3,4"),
		"bells not numbers":     config(runMagic, testToken, s.rpc, "4,x"),
		"oversized":             config(runMagic, testToken, "/"+strings.Repeat("d", maxRunConfig), ""),
	} {
		t.Run(name, func(t *testing.T) {
			s.runConfig = payload
			assert.Equal(t, notConfigured, requireClean(t, s.run(t, probeUnconfigured)))
			assert.Empty(t, listDir(t, s.rpc), "nothing may be written under a refused configuration")
		})
	}
}

// Every prefix of a whole configuration is refused, however the host's
// write was cut: only the final NUL makes it whole.
func TestEveryCutOfARunConfigIsRefused(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	good, err := RunConfig{Token: testToken, Dir: s.rpc, Bells: &Bells{Request: 7, Response: 8}}.encode()
	require.NoError(t, err)
	probe, err := json.Marshal(string(good))
	require.NoError(t, err)
	out := requireClean(t, s.run(t, `
import socket, exec_tools
good = `+string(probe)+`.encode("latin-1")
accepted = []
for n in range(len(good) + 1):
    a, b = socket.socketpair()
    a.sendall(good[:n])
    a.close()
    if exec_tools._inherited_run(b.detach()) is not None:
        accepted.append(n)
print(accepted)
`))
	assert.Equal(t, "["+strconv.Itoa(len(good))+"]\n", out, "only the whole configuration is read as one")
}

// The rpc dir reaches the shim byte for byte, whatever it holds: a
// newline, quotes, a line separator, bytes that are not UTF-8.
func TestTheRunConfigCarriesTheDirExactly(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	name := "rpc \"q\" \\ back\nline \u2028 é \xff\x01"
	s.rpc = s.newRPCDir(t, name)
	out := requireClean(t, s.run(t, `
import os, exec_tools
text("here")
print(os.fsencode(exec_tools._BRIDGE.dir).hex())
`))
	got, err := hex.DecodeString(strings.TrimSpace(out))
	require.NoError(t, err)
	assert.Equal(t, s.rpc, string(got))
	assert.Len(t, frames(t, s.rpc, "text"), 1, "the block lands in that directory")
}

// The module a per-call run imports is the same file for every run: it
// names no run's directory, and two runs with their own directories and
// tokens, from the one module text, each write under their own.
func TestOnePreludeServesEveryRun(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	module, err := os.ReadFile(filepath.Join(s.work, ModuleName+".py"))
	require.NoError(t, err)
	assert.False(t, bytes.Contains(module, []byte(s.rpc)), "the module names no run's directory")
	first := s.rpc
	requireClean(t, s.run(t, `text("one")`))
	s.rpc = s.newRPCDir(t, "rpc-second")
	requireClean(t, s.run(t, `text("two")`))
	assert.Equal(t, [][]byte{[]byte(`{"n": 1, "text": "one"}`)}, frames(t, first, "text"))
	assert.Equal(t, [][]byte{[]byte(`{"n": 1, "text": "two"}`)}, frames(t, s.rpc, "text"))
}
