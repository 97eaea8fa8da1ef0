package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// hopperScript forks a child that keeps moving to a process group of its
// own and forking a successor, each generation exiting after its fork:
// no group kill ever reaches the live generation, only its session does.
// Every generation holds the flock python took on argv[2] (one open file
// description, shared by fork), so the lock is free again exactly when
// the last one is dead: a test sees survivors without a /proc listing,
// which on a busy machine can miss a generation that forks and exits
// while it is read. python prints "hopping" once three generations have
// hopped, then sleeps for argv[1] seconds.
const hopperScript = `import fcntl, os, sys, time
lock = open(sys.argv[2], "w")
fcntl.flock(lock, fcntl.LOCK_EX)
if os.fork() == 0:
    n = 0
    while True:
        os.setpgid(0, 0)
        n += 1
        if n == 3:
            open(sys.argv[2] + ".hopped", "w").close()
        time.sleep(0.01)
        if os.fork():
            os._exit(0)
while not os.path.exists(sys.argv[2] + ".hopped"):
    time.sleep(0.005)
print("hopping", flush=True)
time.sleep(float(sys.argv[1]))
`

// A descendant hopping from group to group while it forks is dead by the
// time the process is Done, whether python exits by itself or is killed
// (a timeout's or a cancel's way).
func TestSessionHopperIsDeadWhenTheProcessIsDone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sleep string
		kill  bool
	}{{"normal exit", "0.2", false}, {"killed", "600", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newSpawner(t)
			lock := filepath.Join(t.TempDir(), "hopper.lock")
			p, out := startPython(t, sp, Limits{}, hopperScript, func(c *Command) { c.Args = append(c.Args, tc.sleep, lock) })
			require.True(t, out.waitFor("hopping\n", hangGuard), "output: %q", out.String())
			sid := p.Pid()
			t.Cleanup(func() { reapSession(t, sid) })
			require.False(t, proctest.LockFree(t, lock), "the hopper holds its lock")
			if tc.kill {
				p.Kill()
			}
			waitDone(t, p)
			assert.True(t, proctest.LockFree(t, lock), "no generation of the hopper may outlive Done")
			assert.Empty(t, proctest.InSession(sid), "no member of python's session may outlive Done")
		})
	}
}

// reapSession reaps the zombies of sid's dead hoppers, which this
// subreaper test process adopted.
func reapSession(t *testing.T, sid int) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := bytes.Fields(stat[i+1:])
		if len(f) < 4 || string(f[3]) != strconv.Itoa(sid) || string(f[1]) != strconv.Itoa(os.Getpid()) {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}
