package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// Environment of the helper-host mode: the test binary re-executed as a
// host that starts python through a Spawner and is then SIGKILLed.
const (
	helperHostEnv   = "KERNELWORKER_TEST_HELPER_HOST"
	helperPythonEnv = "KERNELWORKER_TEST_HELPER_PYTHON"
	// helperWarmEnv makes the helper host keep two interpreters warm
	// instead, and report theirs and the guard's pids.
	helperWarmEnv = "KERNELWORKER_TEST_HELPER_WARM"
)

// hangGuard only keeps a broken test from hanging; no test asserts a time.
const hangGuard = 20 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(helperHostEnv) == "1" {
		os.Exit(helperHost())
	}
	// Orphans of the groups under test are re-parented to this process,
	// so tests can reap them and then see their group as truly empty
	// (kill(-pgid, 0) == ESRCH) instead of as zombies under init.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "set child subreaper:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// helperScript starts two grandchildren that sleep, one in python's group
// and one that moved to a group of its own (still in python's session),
// then reports every pid and sleeps.
const helperScript = `import os, subprocess, sys, time
sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
a = subprocess.Popen(sleeper)
b = subprocess.Popen(sleeper, process_group=0)
print("ready", os.getpid(), a.pid, b.pid, flush=True)
time.sleep(600)
`

// helperHost starts python through a Spawner, prints "pids <python>
// <grandchild> <grandchild> <guard>" once python runs, and waits to be
// killed.
func helperHost() int {
	sp := NewSpawner()
	if os.Getenv(helperWarmEnv) != "" {
		return helperWarmHost(sp)
	}
	ready := newSyncBuffer()
	_, err := sp.Start(context.Background(), Command{
		Path:   os.Getenv(helperPythonEnv),
		Args:   []string{"-c", Bootstrap + helperScript},
		Output: ready,
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if !ready.waitFor("\n", hangGuard) {
		fmt.Println("error python never became ready")
		return 1
	}
	pids, _ := strings.CutPrefix(strings.TrimSpace(ready.String()), "ready ")
	fmt.Printf("pids %s %d\n", pids, sp.guard.proc.Pid)
	time.Sleep(10 * time.Minute) // the test kills us long before
	return 0
}

// helperWarmHost keeps two interpreters warm, prints "pids <warm>
// <warm> <guard>" once both wait for a run, and waits to be killed.
func helperWarmHost(sp *Spawner) int {
	python := os.Getenv(helperPythonEnv)
	sp.KeepWarm(2, 0, func() (Command, bool) { return Command{Path: python, Main: "main.py"}, true })
	deadline := time.Now().Add(hangGuard)
	for sp.Warm() < 2 {
		if time.Now().After(deadline) {
			fmt.Println("error the interpreters never became warm")
			return 1
		}
		time.Sleep(5 * time.Millisecond)
	}
	sp.pool.mu.Lock()
	pids := fmt.Sprintf("%d %d", sp.pool.warm[0].p.Pid(), sp.pool.warm[1].p.Pid())
	sp.pool.mu.Unlock()
	<-sp.guard.first
	fmt.Printf("pids %s %d\n", pids, sp.guard.proc.Pid)
	time.Sleep(10 * time.Minute) // the test kills us long before
	return 0
}

// syncBuffer is an Output a test can read while the reader goroutine
// writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) waitFor(s string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if strings.Contains(b.String(), s) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func newSpawner(t *testing.T) *Spawner {
	sp := NewSpawner()
	t.Cleanup(sp.Close)
	return sp
}

// startPython starts script under lim and registers a cleanup that kills
// and waits for it, so no test leaves a process behind.
func startPython(t *testing.T, sp *Spawner, lim Limits, script string, extra ...func(*Command)) (*Process, *syncBuffer) {
	t.Helper()
	out := newSyncBuffer()
	cmd := Command{Path: proctest.Python(t), Args: []string{"-c", Bootstrap + script}, Limits: lim, Output: out}
	for _, f := range extra {
		f(&cmd)
	}
	p, err := sp.Start(context.Background(), cmd)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		<-p.Done()
	})
	return p, out
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(hangGuard):
		t.Fatalf("process %d never finished", p.Pid())
	}
}

// runPython runs script to completion and returns its output and status.
func runPython(t *testing.T, sp *Spawner, lim Limits, script string, extra ...func(*Command)) (string, ExitStatus) {
	t.Helper()
	p, out := startPython(t, sp, lim, script, extra...)
	waitDone(t, p)
	return out.String(), p.Exit()
}
