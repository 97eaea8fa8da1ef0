package shimpy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/pump"
)

// shimFrameName is the name the shim gives a frame of kind numbered n
// with body, under the test token.
func shimFrameName(kind string, n int, body string) string {
	num := strconv.Itoa(n)
	return pump.FrameName(kind, num, pump.FrameMAC(testToken, kind, num, []byte(body)))
}

func TestAtomicWriteRefusesAPreExistingTemp(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	name := shimFrameName(pump.KindText, 1, `{"n": 1, "text": "a"}`)
	planted := filepath.Join(s.rpc, name+".tmp")
	require.NoError(t, os.WriteFile(planted, []byte("planted"), 0o600))
	out := requireClean(t, s.run(t, `
try:
    text("a")
except ToolError as e:
    print(e)
`))
	assert.Equal(t, "rpc temp for "+name+" already exists\n", out)
	assert.Equal(t, []string{name + ".tmp"}, listDir(t, s.rpc), "nothing else left behind")
	body, err := os.ReadFile(planted)
	require.NoError(t, err)
	assert.Equal(t, "planted", string(body))
}

func TestAtomicWriteNeverFollowsASymlinkedTemp(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	target := filepath.Join(s.work, "target")
	require.NoError(t, os.WriteFile(target, []byte("untouched"), 0o600))
	name := shimFrameName(pump.KindNotify, 1, `{"n": 1, "msg": "a"}`)
	require.NoError(t, os.Symlink(target, filepath.Join(s.rpc, name+".tmp")))
	out := requireClean(t, s.run(t, `
try:
    notify("a")
except ToolError as e:
    print(e)
`))
	assert.Equal(t, "rpc temp for "+name+" already exists\n", out)
	body, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "untouched", string(body))
	assert.Equal(t, []string{name + ".tmp"}, listDir(t, s.rpc))
}

func TestAtomicWriteRefusesATempThatIsNotOwnerOnly(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, `
import os
os.umask(0o277)
try:
    text("a")
except ToolError as e:
    print(e)
`))
	assert.Equal(t, "rpc temp for "+shimFrameName(pump.KindText, 1, `{"n": 1, "text": "a"}`)+" is not owner-only\n", out)
	assert.Empty(t, listDir(t, s.rpc), "the refused temp is removed")
}

func TestAtomicWriteRemovesTheTempWhenEncodingFails(t *testing.T) {
	s := newStage(t, []string{"read"}, 0, nil)
	out := requireClean(t, s.run(t, `
try:
    read(object())
except TypeError as e:
    print("TypeError")
`))
	assert.Equal(t, "TypeError\n", out)
	assert.Empty(t, listDir(t, s.rpc))
}

func TestUncaughtExceptionLeavesAnExceptionFrame(t *testing.T) {
	cases := []struct {
		name   string
		script string
		want   map[string]any
	}{
		{"memory error", "raise MemoryError()", map[string]any{"type": "MemoryError", "errno": nil}},
		{"file too large", "raise OSError(27, 'File too large')", map[string]any{"type": "OSError", "errno": 27.0}},
		{"os error subclass", "open('/nonexistent/dir/file')", map[string]any{"type": "FileNotFoundError", "errno": 2.0}},
		{"non-int errno", "e = OSError('x'); e.errno = 'nope'; raise e", map[string]any{"type": "OSError", "errno": nil}},
		{"keyboard interrupt", "raise KeyboardInterrupt", map[string]any{"type": "KeyboardInterrupt", "errno": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStage(t, nil, 0, nil)
			o := s.run(t, tc.script)
			assert.NotEqual(t, 0, o.exit)
			assert.Contains(t, o.output, "Traceback (most recent call last)", "the traceback is unchanged")
			assert.Contains(t, o.output, tc.want["type"].(string))
			names := listDir(t, s.rpc)
			require.Len(t, names, 1)
			require.True(t, strings.HasPrefix(names[0], pump.ExceptionPrefix), names[0])
			body, err := os.ReadFile(filepath.Join(s.rpc, names[0]))
			require.NoError(t, err)
			assert.Equal(t, pump.FrameName(pump.KindException, "", pump.FrameMAC(testToken, pump.KindException, "", body)), names[0],
				"the record is authenticated")
			var got map[string]any
			require.NoError(t, json.Unmarshal(body, &got))
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNoExceptionFrameWithoutAnUncaughtException(t *testing.T) {
	for name, script := range map[string]string{
		"success":     "print('fine')",
		"caught":      "try:\n    raise MemoryError()\nexcept MemoryError:\n    pass",
		"sys.exit(3)": "import sys\nsys.exit(3)",
	} {
		t.Run(name, func(t *testing.T) {
			s := newStage(t, nil, 0, nil)
			s.run(t, script)
			assert.Empty(t, listDir(t, s.rpc))
		})
	}
}

func TestPrintedLinesPrecedeTheTraceback(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	o := s.run(t, "print('before')\nraise ValueError('boom')")
	assert.Equal(t, 1, o.exit)
	before := strings.Index(o.output, "before\n")
	traceback := strings.Index(o.output, "Traceback")
	require.GreaterOrEqual(t, before, 0, o.output)
	require.GreaterOrEqual(t, traceback, 0, o.output)
	assert.Less(t, before, traceback, o.output)
	assert.Contains(t, o.output, `File "/`, "python prints a traceback")
	assert.Contains(t, o.output, "line 3", "the injected import shifts line numbers by exactly one")
}

func TestPrintedLinesKeepTheirOrderAroundChildProcesses(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	o := s.run(t, `
import subprocess, sys
print("one")
subprocess.run([sys.executable, "-c", "print('two')"], check=True)
print("three", file=sys.stderr)
subprocess.run([sys.executable, "-c", "import sys; print('four', file=sys.stderr)"], check=True)
print("five")
`)
	assert.Equal(t, "one\ntwo\nthree\nfour\nfive\n", requireClean(t, o))
}

func TestChildOutputOrderWithoutTheShimIsTheProblemItSolves(t *testing.T) {
	// Guard for the test above: without the shim, stdout to a pipe is
	// block-buffered and the parent's line lands after the child's.
	s := newStage(t, nil, 0, nil)
	python := proctest.Python(t)
	plain := "import subprocess, sys\nprint('one')\nsubprocess.run([sys.executable, '-c', \"print('two')\"])\n"
	require.NoError(t, os.WriteFile(filepath.Join(s.work, "plain.py"), []byte(plain), 0o600))
	assert.Equal(t, "two\none\n", runPlain(t, python, s.work, "plain.py"))
}
