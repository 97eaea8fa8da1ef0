package shimpy

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/pump"
)

// The per-call token reaches the interpreter only through the socket at
// its fd: the shim reads it at import and closes it, so the script (and
// anything it starts) finds it in no descriptor, no workspace file, no
// environment, no command line, yet its helpers work.
func TestThePerCallTokenIsInNoFileDescriptorOrEnvironment(t *testing.T) {
	s := newStage(t, nil, 0, childBells)
	bells := newBellPipes(t)
	o := s.run(t, `
import json, os, subprocess, sys, exec_tools
token = exec_tools._BRIDGE.token.encode()
found = []
for dirpath, _, files in os.walk(os.path.dirname(os.path.abspath(exec_tools.__file__))):
    for name in files:
        with open(os.path.join(dirpath, name), "rb") as f:
            if token in f.read():
                found.append(name)
for proc_file in ("environ", "cmdline"):
    with open("/proc/self/" + proc_file, "rb") as f:
        if token in f.read():
            found.append(proc_file)
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
try:
    os.fstat(5)
    closed = False
except OSError:
    closed = True
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"],
                       capture_output=True, text=True).stdout.strip()
text("works")
print(json.dumps({"found": found, "env": any(token.decode() in v for v in os.environ.values()),
                  "token_fd_closed": closed, "token_len": len(token), "child_fds": child}))
`, bells.ChildFiles()...)
	bells.releaseChildEnds()
	var got struct {
		Found         []string `json:"found"`
		Env           bool     `json:"env"`
		TokenFDClosed bool     `json:"token_fd_closed"`
		TokenLen      int      `json:"token_len"`
		ChildFDs      string   `json:"child_fds"`
	}
	lastJSONLine(t, requireClean(t, o), &got)
	assert.Empty(t, got.Found, "the token is in no workspace file and not in /proc/self")
	assert.False(t, got.Env)
	assert.True(t, got.TokenFDClosed)
	assert.Equal(t, len(testToken), got.TokenLen, "the shim has the whole token")
	assert.Equal(t, "[0, 1, 2, 3]", got.ChildFDs, "a child inherits neither the bells nor the token socket")
	require.Len(t, frames(t, s.rpc, "text"), 1, "and the helpers work: an authenticated block")
}

// A pipe at the token's fd (which another process could reopen through
// /proc and read first) is not taken for the run's configuration, whole
// as it is: the bridge stays unconfigured rather than run on a token
// someone else may hold.
func TestATokenFromAnythingButASocketLeavesTheBridgeUnconfigured(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	s.tokenFD = 0 // start hands over no socket: fd 3 is the pipe below
	r, w, err := os.Pipe()
	require.NoError(t, err)
	whole, err := RunConfig{Token: testToken, Dir: s.rpc}.encode()
	require.NoError(t, err)
	_, err = w.Write(whole)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	defer r.Close()
	out := requireClean(t, s.run(t, `
try:
    text("x")
except ToolError as e:
    print(e)
`, r))
	assert.Equal(t, "exec_tools is not configured for this cell\n", out)
	assert.Empty(t, listDir(t, s.rpc))
}

// A response planted before the host answers (another session's script
// can list the shared staging root) is not the host's answer: the shim
// waits for the entry at the name to change and returns the real content.
func TestAForgedResponseIsIgnoredAndTheRealAnswerReturned(t *testing.T) {
	for _, mode := range wakeModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			run := startBridgeRun(t, mode, []string{"read"}, `
import json
print(json.dumps([read("a"), read("b"), read("c")]))
`)
			other := "t2"
			for i, forged := range []func(id int) []byte{
				func(id int) []byte { b, _ := json.Marshal(okResponse(id, "forged: no mac")); return b },
				func(id int) []byte { return authenticate(t, other, id, okResponse(id, "forged: another token")) },
				func(id int) []byte { return authenticate(t, testToken, id+1, okResponse(id, "forged: another id")) },
			} {
				req := run.host.next(t)
				require.Equal(t, i+1, req.file)
				run.host.publish(t, req.file, forged(req.file))
				time.Sleep(50 * time.Millisecond) // the shim reads it and must keep waiting
				run.host.answer(t, req.file, okResponse(req.file, "real"))
			}
			assert.Equal(t, `["real", "real", "real"]`+"\n", requireClean(t, run.proc.wait()))
		})
	}
}

// A planted symlink or FIFO at the response name neither blocks the shim
// nor is followed: it waits for the host's answer.
func TestAPlantedLinkOrFIFOAtTheResponseNameIsNotAnAnswer(t *testing.T) {
	run := startBridgeRun(t, wakeModes[1], []string{"read"}, `print(read("a"))`)
	req := run.host.next(t)
	target := filepath.Join(run.stage.work, "target.json")
	require.NoError(t, os.WriteFile(target, authenticate(t, testToken, req.file, okResponse(req.file, "via link")), 0o600))
	res := filepath.Join(run.stage.rpc, "res-1.json")
	require.NoError(t, os.Symlink(target, res))
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, os.Remove(res))
	require.NoError(t, syscall.Mkfifo(res, 0o600))
	time.Sleep(50 * time.Millisecond)
	run.host.answer(t, req.file, okResponse(req.file, "real"))
	assert.Equal(t, "real\n", requireClean(t, run.proc.wait()))
}

// The shim's MAC is the pump's, for every kind, number and body shape.
func TestTheShimsMACsVerifyOnTheHost(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	o := s.run(t, `
import json, exec_tools
b = exec_tools._BRIDGE
for body in [b"", b"{}", "é😀".encode(), bytes(range(256)), b"x" * 100000]:
    for kind, num in [(b"req", b"1"), (b"res", b"-3"), (b"text", b"007"), (b"exception", b"")]:
        print(json.dumps([kind.decode(), num.decode(), body.hex(), b.mac(kind, num, body)]))
`)
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(requireClean(t, o)), "\n") {
		var got [4]string
		require.NoError(t, json.Unmarshal([]byte(line), &got), line)
		body, err := hex.DecodeString(got[2])
		require.NoError(t, err)
		assert.Equal(t, pump.FrameMAC(testToken, got[0], got[1], body), got[3], "%s %q", got[0], got[1])
		lines++
	}
	assert.Equal(t, 20, lines)
}

// A directory at the response name is the one thing the host cannot
// replace: the call fails at once instead of waiting for an answer that
// cannot come.
func TestADirectoryAtTheResponseNameFailsTheCall(t *testing.T) {
	run := startBridgeRun(t, wakeModes[1], []string{"read"}, `
try:
    read("a")
except ToolError as e:
    print("ToolError:", e)
`)
	run.host.next(t)
	require.NoError(t, os.Mkdir(filepath.Join(run.stage.rpc, "res-1.json"), 0o700))
	_, _ = run.bells.responseWrite.Write([]byte{1})
	assert.Equal(t, "ToolError: invalid rpc response\n", requireClean(t, run.proc.wait()))
}
