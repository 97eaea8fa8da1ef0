package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// A guard killed behind the host's back is replaced at the next start, and
// the replacement knows every session still alive: closing its pipe (what
// the host's death does) kills a child started before the replacement,
// grandchild included.
func TestKilledGuardIsReplacedAndGuardsEarlierChildren(t *testing.T) {
	sp := newSpawner(t)
	first, out := startPython(t, sp, Limits{}, `import subprocess, sys, time
gc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("grandchild", gc.pid, flush=True)
time.sleep(600)`)
	require.True(t, out.waitFor("\n", hangGuard))
	grandchild := proctest.PidsIn(t, out.String(), "grandchild")[0]
	t.Cleanup(func() { _ = unix.Kill(grandchild, unix.SIGKILL); proctest.Reap(t, grandchild, hangGuard) })

	sp.guard.mu.Lock()
	old, oldExited := sp.guard.proc, sp.guard.exited
	sp.guard.mu.Unlock()
	require.NoError(t, old.Kill())
	<-oldExited

	second, _ := startPython(t, sp, Limits{}, "import time; time.sleep(600)")
	sp.guard.mu.Lock()
	replaced := sp.guard.proc != old && sp.guard.w != nil
	sp.guard.mu.Unlock()
	require.True(t, replaced, "the next start must start a new guard")

	sp.guard.close()
	for _, p := range []*Process{first, second} {
		waitDone(t, p)
		assert.Equal(t, unix.SIGKILL, p.Exit().Signal, "pid %d", p.Pid())
	}
	deadline := time.Now().Add(hangGuard)
	for proctest.Alive(grandchild) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.False(t, proctest.Alive(grandchild), "the replacement guard must kill the first child's grandchild")
	assert.True(t, strings.HasPrefix(out.String(), "grandchild "))
}

// The guard starts with the first child, but with the environment the
// host had when it made the Spawner, so what marks a host's processes
// marks its guard too.
func TestGuardGetsTheEnvironmentOfTheSpawnersCreation(t *testing.T) {
	t.Setenv("KERNELWORKER_TEST_GUARD_ENV", "at-creation")
	sp := newSpawner(t)
	t.Setenv("KERNELWORKER_TEST_GUARD_ENV", "changed-later")
	startPython(t, sp, Limits{}, "import time; time.sleep(600)")
	<-sp.guard.first
	sp.guard.mu.Lock()
	pid := sp.guard.proc.Pid
	sp.guard.mu.Unlock()
	var env []byte
	require.Eventually(t, func() bool {
		env, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		return bytes.Contains(env, []byte(guardEnv+"=1"))
	}, hangGuard, 5*time.Millisecond)
	assert.Contains(t, string(env), "KERNELWORKER_TEST_GUARD_ENV=at-creation\x00")
}

// A Spawner that never starts a child never starts a guard, and closes at
// once.
func TestSpawnerWithoutChildrenHasNoGuard(t *testing.T) {
	t.Setenv("KERNELWORKER_TEST_GUARD_ENV", "idle-spawner")
	sp := NewSpawner()
	sp.Close()
	sp.guard.mu.Lock()
	defer sp.guard.mu.Unlock()
	assert.Nil(t, sp.guard.proc)
	assert.Empty(t, proctest.Marked("KERNELWORKER_TEST_GUARD_ENV", "idle-spawner"))
}
