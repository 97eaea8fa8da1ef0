package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/internal/proctest"
)

// hopper is a script fragment that forks a child which keeps moving to a
// process group of its own and forking a successor, each generation
// exiting after its fork, so no group kill reaches the live one. Every
// generation holds the flock taken on LOCK (one open file description,
// shared by fork): the lock is free again exactly when the last one is
// dead, which a test can check without a /proc listing (one can miss a
// generation that forks and exits while it is read). The fragment
// returns once three generations have hopped.
func hopper(lock string) string {
	return fmt.Sprintf(`
import fcntl, os, time
_lock = open(%[1]q, "w")
fcntl.flock(_lock, fcntl.LOCK_EX)
if os.fork() == 0:
    n = 0
    while True:
        os.setpgid(0, 0)
        n += 1
        if n == 3:
            open(%[1]q + ".hopped", "w").close()
        time.sleep(0.01)
        if os.fork():
            os._exit(0)
while not os.path.exists(%[1]q + ".hopped"):
    time.sleep(0.005)
text("hopping")
`, lock)
}

// A per-call run whose child hops from group to group while it forks
// returns only once that child's every generation is dead: after a
// normal exit as after a timeout.
func TestPerCallHopperIsDeadWhenTheResultReturns(t *testing.T) {
	for _, tc := range []struct {
		name, tail string
		timeoutMS  int
		killedBy   string
	}{
		{"normal exit", "", 20000, ""},
		{"timeout", "time.sleep(600)\n", 1000, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			lock := filepath.Join(e.root, "hopper.lock")
			res := e.run(hopper(lock)+tc.tail, tc.timeoutMS)
			left := scriptProcesses(e.mark)
			free := proctest.LockFree(t, lock)
			require.Equal(t, []string{"hopping"}, res.Blocks, res.Text())
			assert.Equal(t, tc.killedBy, string(res.Details.KilledBy))
			assert.True(t, free, "a generation of the hopper outlived the result")
			assert.Empty(t, left, "no process of the run may outlive its result")
		})
	}
}

// A kernel's session is killed as the kernel ends: when a timed-out
// cell's result returns, or once a detached owner's kernel is gone, no
// generation of a hopper it started is left. While the kernel lives, the hopper is part
// of its state.
func TestSessionHopperIsDeadWhenTheKernelEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout bool
	}{{"timeout", true}, {"detach", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := sessionEnv(t, nil)
			o := e.attach("s1")
			lock := filepath.Join(e.root, "hopper.lock")
			script, timeoutMS := hopper(lock), 20000
			if tc.timeout {
				script, timeoutMS = script+"time.sleep(600)\n", 1500
			}
			res := e.cell(o, script, timeoutMS)
			require.Equal(t, []string{"hopping"}, res.Blocks, res.Text())
			if tc.timeout {
				// The timed-out cell's result comes once its kernel is
				// gone, and with it every generation.
				free := proctest.LockFree(t, lock)
				assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
				assert.True(t, free, "a generation of the hopper outlived the timed-out cell's result")
			} else {
				assert.True(t, boolp(res.Details.StateRetained))
				assert.False(t, proctest.LockFree(t, lock), "the hopper lives with its kernel")
				require.NoError(t, o.Detach(context.Background()))
			}
			// The kernel has ended once it is neither live nor stopping.
			waitSnapshot(t, e, func(s executecode.Snapshot) bool {
				return s.Capacity.Live == 0 && s.Phases["stopping"] == 0 && s.Phases["unreachable"] == 0
			})
			left := scriptProcesses(e.mark)
			assert.True(t, proctest.LockFree(t, lock), "a generation of the hopper outlived its kernel")
			assert.Empty(t, left, "no process of the kernel may outlive it")
		})
	}
}

// The README's exception: a descendant that starts a session of its own
// (setsid) is beyond the runtime's reach, and outlives its run.
func TestSetsidDescendantOutlivesItsRun(t *testing.T) {
	e := newEnv(t, nil)
	defer killMarked(e.mark)
	res := e.run(`
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    os.close(r)
    if os.fork() == 0:
        with open("escapee.pid.tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.replace("escapee.pid.tmp", "escapee.pid")
        os.close(w)
        time.sleep(600)
    os._exit(0)
os.close(w)
os.read(r, 1)
text("escaped")
`)
	require.Equal(t, []string{"escaped"}, res.Blocks, res.Text())
	escapee := pidFile(t, filepath.Join(e.root, "escapee.pid"))
	assert.Nil(t, syscall.Kill(escapee, 0), "the setsid descendant is still running")
	killMarked(e.mark)
}
