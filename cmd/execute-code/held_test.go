package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// forkBomb forks until the kernel refuses, each child trying to fork
// twice more, and reports whether the refusal came. It is bounded (at most
// 600 processes) so that a limit that did not hold fails the test rather
// than the machine.
const forkBomb = `
import os, time
def child():
    for _ in range(2):
        try:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        except OSError:
            pass
    time.sleep(60)
    os._exit(0)
refused, kids = False, 0
for _ in range(200):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused = True
        break
    if pid == 0:
        child()
    kids += 1
text("refused" if refused else "not refused after %d" % kids)
`

// nprocUser is who the fork bomb runs as: RLIMIT_NPROC does not bind root,
// so a root test runs the CLI as nobody, with a scratch tree nobody can
// use. The limit counts every process of that user.
func nprocUser(t *testing.T) (cred *syscall.Credential, scratch string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, t.TempDir()
	}
	// Under /tmp, not the test's TMPDIR: every ancestor must be
	// traversable by nobody.
	scratch, err := os.MkdirTemp("/tmp", "execute-code-nproc-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(scratch) })
	require.NoError(t, os.Chmod(scratch, 0o755))
	return &syscall.Credential{Uid: 65534, Gid: 65534}, scratch
}

func TestForkBombUnderNprocLimitIsRefusedAndLeavesNothing(t *testing.T) {
	cred, scratch := nprocUser(t)
	bin := filepath.Join(scratch, "execute-code")
	copyExecutable(t, binary, bin)
	root, tmp := filepath.Join(scratch, "root"), filepath.Join(scratch, "tmp")
	require.NoError(t, os.Mkdir(root, 0o755))
	require.NoError(t, os.Mkdir(tmp, 0o700))
	if cred != nil {
		require.NoError(t, os.Chown(tmp, int(cred.Uid), int(cred.Gid)))
	}
	mark := newMark()
	t.Cleanup(func() {
		for _, pid := range proctest.Marked(markEnv, mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	cmd := exec.Command(bin, "run", "--root", root, "--timeout-ms", "10000", "-")
	cmd.Stdin = bytes.NewReader([]byte(forkBomb))
	cmd.Dir = root
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp, markEnv + "=" + mark,
		"LEMON_EXECUTE_CODE_NPROC_LIMIT=50"}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	} else {
		cmd.Env[0] = "PATH=" + os.Getenv("PATH")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "stdout %q stderr %q", out.String(), errb.String())

	assert.Contains(t, out.String(), "refused", "the limit stopped the bomb")
	assert.Empty(t, proctest.WaitGone(proctest.Marked(markEnv, mark), 3*time.Second), "no process left")
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	assert.Empty(t, left, "nothing left in the staging TMPDIR")
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, errors.Join(err, dst.Close()))
}
