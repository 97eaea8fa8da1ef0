package proc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// warmPids are the pids of the pool's interpreters, oldest first.
func warmPids(sp *Spawner) []int {
	sp.pool.mu.Lock()
	defer sp.pool.mu.Unlock()
	var pids []int
	for _, it := range sp.pool.warm {
		pids = append(pids, it.p.Pid())
	}
	return pids
}

// keepWarm keeps n interpreters of cmd's shape and waits until they all
// wait for a run.
func keepWarm(t *testing.T, sp *Spawner, n int, idle time.Duration, cmd Command) []int {
	t.Helper()
	sp.KeepWarm(n, idle, func() (Command, bool) { return cmd, true })
	require.Eventually(t, func() bool { return sp.Warm() == n }, hangGuard, time.Millisecond)
	return warmPids(sp)
}

// run starts cmd, waits for its end and returns its pid and output.
func run(t *testing.T, sp *Spawner, cmd Command) (int, string, ExitStatus) {
	t.Helper()
	out := newSyncBuffer()
	cmd.Output = out
	p, err := sp.Start(context.Background(), cmd)
	require.NoError(t, err)
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	waitDone(t, p)
	return p.Pid(), out.String(), p.Exit()
}

func helloCmd(t *testing.T) Command {
	return Command{Path: proctest.Python(t), Main: mainFile(t, "print('hello')\n"), Dir: t.TempDir()}
}

// A warm interpreter someone killed is never handed out: the start takes
// the next, or starts its own, and its program runs.
func TestAKilledWarmInterpreterIsNeverHandedOut(t *testing.T) {
	sp := newSpawner(t)
	cmd := helloCmd(t)
	pids := keepWarm(t, sp, 2, 0, cmd)
	for _, pid := range pids {
		require.NoError(t, unix.Kill(pid, unix.SIGKILL))
	}
	pid, out, exit := run(t, sp, cmd)
	assert.NotContains(t, pids, pid)
	assert.Equal(t, "hello\n", out)
	assert.Equal(t, 0, exit.Code)
	// The pool fills again with live ones.
	require.Eventually(t, func() bool { return sp.Warm() == 2 }, hangGuard, time.Millisecond)
}

// Nothing is shared across shapes: a start whose interpreter, flags,
// environment, stdin, stderr, expected source, tag or sandbox differs
// from the pool's starts its own interpreter and leaves the pool alone.
func TestAStartOfAnotherShapeStartsItsOwnInterpreter(t *testing.T) {
	sp := newSpawner(t)
	base := helloCmd(t)
	pids := keepWarm(t, sp, 1, 0, base)
	for name, change := range map[string]func(*Command){
		"flags":       func(c *Command) { c.Flags = []string{"-B"} },
		"environment": func(c *Command) { c.Env = append(os.Environ(), "EXECUTE_CODE_OTHER_SHAPE=1") },
		"source":      func(c *Command) { c.MainSource = "print('hello')\n" },
		"tag":         func(c *Command) { c.Tag = "other helpers" },
		"memory":      func(c *Command) { c.Limits.MemoryMB = 512 },
		"stdin":       func(c *Command) { c.StdinSocket = true },
		"stderr":      func(c *Command) { c.Stderr = newSyncBuffer() },
		"sandbox":     func(c *Command) { c.Sandbox = &Sandbox{} },
	} {
		cmd := base
		change(&cmd)
		assert.NotEqual(t, shapeOf(base).key, shapeOf(cmd).key, name)
		if name == "sandbox" {
			continue // its rules need a workspace: the facade's tests run it
		}
		pid, out, _ := run(t, sp, cmd)
		assert.NotEqual(t, pids[0], pid, name)
		assert.Equal(t, "hello\n", out, name)
		assert.Equal(t, pids, warmPids(sp), "%s: the pool keeps its interpreter", name)
	}
	// The limits but for the memory limit's arena cap are the run's
	// own, set at the take.
	cmd := base
	cmd.Limits = Limits{CPUSeconds: 9, FsizeMB: 3}
	assert.Equal(t, shapeOf(base).key, shapeOf(cmd).key)
	pid, _, _ := run(t, sp, cmd)
	assert.Equal(t, pids[0], pid)
}

// A start of the pool's shape takes an interpreter still in its start-up
// rather than start another, and its program runs once that start-up is
// done.
func TestAStartTakesAWarmInterpreterStillStartingUp(t *testing.T) {
	sp := newSpawner(t)
	slow := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(slow, "sitecustomize.py"), []byte("import time\ntime.sleep(1)\n"), 0o600))
	cmd := helloCmd(t)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+slow)
	sp.KeepWarm(1, 0, func() (Command, bool) { return cmd, true })
	require.Eventually(t, func() bool { return len(warmPids(sp)) == 1 }, hangGuard, time.Millisecond)
	starting := warmPids(sp)[0]
	assert.Equal(t, 0, sp.Warm(), "still in its start-up")
	pid, out, _ := run(t, sp, cmd)
	assert.Equal(t, starting, pid)
	assert.Equal(t, "hello\n", out)
}

// An interpreter idle for the idle timeout is ended, and the pool stays
// empty until a start of its shape asks for it again.
func TestIdleWarmInterpretersEndAndReturnOnDemand(t *testing.T) {
	sp := newSpawner(t)
	cmd := helloCmd(t)
	sp.KeepWarm(1, 50*time.Millisecond, func() (Command, bool) { return cmd, true })
	require.Eventually(t, func() bool { return len(warmPids(sp)) == 1 }, hangGuard, time.Millisecond)
	first := warmPids(sp)[0]
	require.Eventually(t, func() bool { return !proctest.Alive(first) }, hangGuard, time.Millisecond)
	sp.pool.mu.Lock()
	dormant, filling, left := sp.pool.dormant, sp.pool.filling, len(sp.pool.warm)
	// The replacement must not be idle as soon as it is ready on a slow
	// machine.
	sp.pool.idle = time.Hour
	sp.pool.mu.Unlock()
	assert.True(t, dormant)
	assert.Zero(t, filling, "no replacement for an idle one")
	assert.Zero(t, left)

	pid, out, _ := run(t, sp, cmd)
	assert.NotEqual(t, first, pid)
	assert.Equal(t, "hello\n", out)
	require.Eventually(t, func() bool { return len(warmPids(sp)) == 1 }, hangGuard, time.Millisecond,
		"the start of the pool's shape starts a replacement")
}

// A changed host environment changes the pool's shape: a start of the
// new shape starts its own interpreter, the stale one is ended and the
// pool refills with the new shape.
func TestAChangedEnvironmentRenewsThePool(t *testing.T) {
	t.Setenv("EXECUTE_CODE_WARM_GENERATION", "1")
	sp := newSpawner(t)
	cmd := helloCmd(t) // Env nil: the host's environment at each start
	old := keepWarm(t, sp, 1, 0, cmd)
	t.Setenv("EXECUTE_CODE_WARM_GENERATION", "2")
	pid, _, _ := run(t, sp, cmd)
	assert.NotEqual(t, old[0], pid)
	require.Eventually(t, func() bool { return !proctest.Alive(old[0]) }, hangGuard, time.Millisecond)
	require.Eventually(t, func() bool { return sp.Warm() == 1 }, hangGuard, time.Millisecond)
	pid, _, _ = run(t, sp, cmd)
	assert.NotEqual(t, old[0], pid)
}

// Close ends every warm interpreter, those still being forked or in
// their start-up too, before it returns.
func TestCloseEndsWarmInterpretersEvenMidStart(t *testing.T) {
	python := proctest.Python(t)
	for i := range 8 {
		marker := "close-" + strconv.Itoa(i)
		sp := NewSpawner()
		env := append(os.Environ(), "EXECUTE_CODE_WARM_MARK="+marker)
		sp.KeepWarm(3, 0, func() (Command, bool) { return Command{Path: python, Main: "main.py", Env: env}, true })
		time.Sleep(time.Duration(i) * 3 * time.Millisecond) // somewhere in the fork or the start-up
		sp.Close()
		assert.Empty(t, proctest.Marked("EXECUTE_CODE_WARM_MARK", marker), "after Close %d", i)
		assert.Zero(t, sp.Warm())
	}
}

// A host killed with SIGKILL takes its warm interpreters with it (the
// parent-death signal; the guard knows their sessions too).
func TestHostDeathTakesWarmInterpretersWithIt(t *testing.T) {
	host, pids := startHelperHost(t, helperWarmEnv+"=1")
	require.Len(t, pids, 3, "two warm interpreters, the guard")
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
			proctest.Reap(t, pid, hangGuard)
		}
	})

	require.NoError(t, host.Process.Signal(syscall.SIGKILL))
	_ = host.Wait()
	assert.Empty(t, proctest.WaitGone(pids, hangGuard), "warm interpreters and the guard outlived their SIGKILLed host")
}

// The launcher is compiled once per binary and optimization level: the
// first interpreter hands back its code, and the next ones run that code
// (and their programs) alike; another optimization level compiles anew.
func TestTheLauncherIsCompiledOncePerBinaryAndLevel(t *testing.T) {
	sp := newSpawner(t)
	cmd := helloCmd(t)
	for range 2 {
		_, out, _ := run(t, sp, cmd)
		assert.Equal(t, "hello\n", out)
	}
	sp.codeMu.Lock()
	entries := len(sp.code)
	sp.codeMu.Unlock()
	assert.Equal(t, 1, entries)
	cmd.Flags = []string{"-O"}
	_, out, _ := run(t, sp, cmd)
	assert.Equal(t, "hello\n", out)
	sp.codeMu.Lock()
	entries = len(sp.code)
	sp.codeMu.Unlock()
	assert.Equal(t, 2, entries)
}

// An interpreter whose start-up ends it (a broken site hook) runs no
// program however it was started; the start shows that exit and what the
// start-up wrote, as a direct start would, and a pool of such
// interpreters hands out none of them.
func TestAnInterpreterThatDiesInItsStartUpShowsWhy(t *testing.T) {
	sp := newSpawner(t)
	broken := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(broken, "sitecustomize.py"),
		[]byte("import os, sys\nsys.stderr.write('site is broken\\n')\nsys.stderr.flush()\nos._exit(3)\n"), 0o600))
	cmd := helloCmd(t)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+broken)
	direct := cmd
	direct.Args, direct.Main = []string{cmd.Main}, ""
	_, want, wantExit := run(t, sp, direct)
	require.Equal(t, 3, wantExit.Code)
	require.Equal(t, "site is broken\n", want)

	_, got, exit := run(t, sp, cmd)
	assert.Equal(t, want, got, "cold")
	assert.Equal(t, 3, exit.Code, "cold")

	sp.KeepWarm(1, 0, func() (Command, bool) { return cmd, true })
	_, got, exit = run(t, sp, cmd)
	assert.Equal(t, want, got, "with a pool")
	assert.Equal(t, 3, exit.Code, "with a pool")
	assert.Zero(t, sp.Warm())
}

// A start that comes while the pool's first interpreter is still being
// forked waits for that one instead of forking its own, and the
// replacement is forked only once the taken one is past its start-up:
// never two start-ups at once for one run. Each interpreter's start-up
// logs its pid, so the log is the order they started in.
func TestAStartRightAfterKeepWarmForksNothingOfItsOwn(t *testing.T) {
	sp := newSpawner(t)
	slow := t.TempDir()
	log := filepath.Join(slow, "started")
	require.NoError(t, os.WriteFile(filepath.Join(slow, "sitecustomize.py"), []byte(
		"import os, time\nopen("+strconv.Quote(log)+", 'a').write('%d\\n' % os.getpid())\ntime.sleep(0.3)\n"), 0o600))
	cmd := helloCmd(t)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+slow)
	template := cmd
	sp.KeepWarm(1, 0, func() (Command, bool) { return template, true })
	pid, out, _ := run(t, sp, cmd)
	assert.Equal(t, "hello\n", out)
	require.Eventually(t, func() bool { return sp.Warm() == 1 }, hangGuard, time.Millisecond)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n%d\n", pid, warmPids(sp)[0]), string(b),
		"the run's interpreter is the pool's first, its replacement the second")
	assert.Equal(t, int64(2), sp.launched.Load())
}
