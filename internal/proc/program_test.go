package proc

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// startProgram starts the shell script as a Program and registers the
// same cleanup as startPython.
func startProgram(t *testing.T, sp *Spawner, script string, lim Limits) (*Process, *syncBuffer) {
	t.Helper()
	out := newSyncBuffer()
	cmd := Command{Path: proctest.Python(t), Program: "/bin/sh", Args: []string{"-c", script}, Output: out, Limits: lim}
	p, err := sp.Start(context.Background(), cmd)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		<-p.Done()
	})
	return p, out
}

// A program starts as python does: its limits set before its first
// instruction, no handshake variable, no descriptor the host inherited
// without close-on-exec, and it is the process the Spawner reports.
func TestProgramStartsWithLimitsAndOnlyItsOwnDescriptors(t *testing.T) {
	sp := newSpawner(t)
	// The listing goes through a file written by a subshell, not a pipe:
	// a pipeline's pipe is the shell's own descriptor for a moment, and
	// the shell keeps a copy of stdout while it redirects a command's.
	fds := filepath.Join(t.TempDir(), "fds")
	p, out := startProgram(t, sp, `echo "pid $$"; ulimit -f; env | grep -c EXECUTE_CODE_HANDSHAKE; (ls /proc/$$/fd) > `+fds+`; tr '\n' ' ' < `+fds, Limits{FsizeMB: 3})
	waitDone(t, p)
	got := out.String()
	assert.Contains(t, got, "pid "+strconv.Itoa(p.Pid())+"\n", "the program replaced python in the same process")
	assert.Contains(t, got, "\n6144\n", "ulimit -f counts 512-byte blocks: 3 MiB")
	assert.Contains(t, got, "\n0\n", "no handshake variable")
	assert.Contains(t, got, "\n0 1 2 ", "stdin, stdout, stderr")
	assert.True(t, strings.HasSuffix(got, "\n0 1 2 "), "no descriptor but the standard three: %q", got)
}

// A program leads its own session with the parent-death signal, and what
// it leaves in its session dies with it, as a python child's does.
func TestProgramLeavesNothingInItsSession(t *testing.T) {
	sp := newSpawner(t)
	p, out := startProgram(t, sp, `sleep 600 & echo "grandchild $!"; sleep 600`, Limits{})
	require.True(t, out.waitFor("\n", hangGuard))
	grandchild := proctest.PidsIn(t, out.String(), "grandchild")[0]
	t.Cleanup(func() { _ = unix.Kill(grandchild, unix.SIGKILL) })
	sid, err := unix.Getsid(p.Pid())
	require.NoError(t, err)
	assert.Equal(t, p.Pid(), sid)
	p.Kill()
	waitDone(t, p)
	assert.Empty(t, proctest.WaitGone([]int{grandchild}, time.Second))
}

// A program that cannot be executed ends its process with python's error
// on stderr: the caller learns why from there.
func TestProgramThatCannotRunExitsWithTheReason(t *testing.T) {
	sp := newSpawner(t)
	errOut := newSyncBuffer()
	p, err := sp.Start(context.Background(), Command{Path: proctest.Python(t), Program: "/nonexistent/server", Stderr: errOut})
	require.NoError(t, err)
	waitDone(t, p)
	assert.Equal(t, 1, p.Exit().Code)
	assert.Contains(t, errOut.String(), "FileNotFoundError")
}
