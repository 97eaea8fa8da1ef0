package kernelworker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/shimpy"
	"github.com/executecode/executecode/telemetry"
)

func TestKernelKeepsStateAcrossCells(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()

	first := h.run(pid, "a = 41")
	require.Equal(t, "", first.Reason, "%+v", first)
	assert.Equal(t, "cell-1", first.RequestID)
	assert.True(t, first.StateRetained)
	assert.Equal(t, 1, first.CellsCompleted)

	second := h.run(pid, "print(a + 1)")
	require.Equal(t, "", second.Reason, "%+v", second)
	assert.Equal(t, "cell-2", second.RequestID)
	assert.Equal(t, "42\n", second.Output.Text)
	assert.Equal(t, 2, second.CellsCompleted)
	assert.Equal(t, []string{"start", "stop:ok", "start", "stop:ok"}, h.cellEvents())
}

func TestExceptionRetainsStateAndReportsTheFilteredTraceback(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()

	res := h.run(pid, "x = 2\nprint('before')\nraise ValueError('boom')")
	require.Equal(t, ReasonException, res.Reason, "%+v", res)
	assert.True(t, res.StateRetained)
	assert.Equal(t, 1, res.CellsCompleted, "an exception cell completes")
	assert.Equal(t, "before\n", res.Output.Text)
	require.NotNil(t, res.Exception)
	assert.Equal(t, "error", res.Exception.Kind)
	assert.Equal(t, "ValueError", res.Exception.Name)
	assert.Equal(t, "boom", res.Exception.Message)
	assert.Contains(t, res.Exception.Traceback, "<cell>")
	assert.Contains(t, res.Exception.Traceback, "ValueError: boom")
	assert.NotContains(t, res.Exception.Traceback, "runner.py")

	after := h.run(pid, "print(x)")
	require.Equal(t, "", after.Reason, "%+v", after)
	assert.Equal(t, "2\n", after.Output.Text, "mutations before the raise are kept")
	assert.Equal(t, 2, after.CellsCompleted)
	assert.Equal(t, PhaseIdle, h.status(pid).Phase)
	assert.Equal(t, []string{"start", "stop:exception", "start", "stop:ok"}, h.cellEvents())
}

func TestEveryKindOfCellExceptionKeepsTheKernel(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	require.Equal(t, "", h.run(pid, "kept = 'yes'").Reason)

	tests := []struct {
		code, kind, name, message string
	}{
		{"import sys\nsys.exit(3)", "system_exit", "SystemExit", "SystemExit: 3"},
		{"input('name?')", "unsupported_input", "UnsupportedInput", ""},
		{"import sys\nsys.stdin.readline()", "unsupported_input", "UnsupportedInput", ""},
		{"raise KeyboardInterrupt", "interrupted", "KeyboardInterrupt", ""},
		{"def f(:\n  pass", "error", "SyntaxError", ""},
	}
	for _, tt := range tests {
		res := h.run(pid, tt.code)
		require.Equal(t, ReasonException, res.Reason, "%q: %+v", tt.code, res)
		require.NotNil(t, res.Exception, tt.code)
		assert.Equal(t, tt.kind, res.Exception.Kind, tt.code)
		assert.Equal(t, tt.name, res.Exception.Name, tt.code)
		if tt.message != "" {
			assert.Equal(t, tt.message, res.Exception.Message, tt.code)
		}
		if tt.kind == "unsupported_input" {
			assert.Contains(t, res.Exception.Message, "input() is not supported", tt.code)
		}
		assert.True(t, res.StateRetained, tt.code)
	}
	assert.Equal(t, "yes\n", h.run(pid, "print(kept)").Output.Text)
}

func TestCellsRunStrictlyInArrivalOrder(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	g := newGate(t)
	first := h.submit(pid, "order = []\n"+g.wait())
	var replies []<-chan CellResult
	for i := range 5 {
		replies = append(replies, h.submit(pid, "order.append("+string(rune('0'+i))+")"))
	}
	h.waitQueue(pid, 5)
	g.open()
	require.Equal(t, "", h.result(first).Reason)
	for i, r := range replies {
		res := h.result(r)
		require.Equal(t, "", res.Reason, "%+v", res)
		assert.Equal(t, "cell-"+string(rune('2'+i)), res.RequestID)
	}
	assert.Equal(t, "[0, 1, 2, 3, 4]\n", h.run(pid, "print(order)").Output.Text)
}

func TestStatusDescribesTheWorkerWithoutCode(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	g := newGate(t)
	active := h.submit(pid, g.wait())
	queued := h.submit(pid, "pass")
	h.waitQueue(pid, 1)

	st := h.status(pid)
	assert.Equal(t, &Status{
		Phase: PhaseRunning, Generation: 7, Key: "test-key", QueueDepth: 1,
		ActiveRequestID: "cell-1", CellsCompleted: 0, ProcessAlive: true,
	}, st)

	g.open()
	h.result(active)
	h.result(queued)
	h.waitPhase(pid, PhaseIdle)
	st = h.status(pid)
	assert.Equal(t, 2, st.CellsCompleted)
	assert.Equal(t, "", st.ActiveRequestID)
}

func TestInvalidRequestsAreRejectedWithoutRunningAnything(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	tests := []struct {
		name string
		mod  cellOpt
	}{
		{"empty code", func(e *Execute) { e.Code = "" }},
		{"zero timeout", func(e *Execute) { e.Timeout = 0 }},
		{"negative timeout", func(e *Execute) { e.Timeout = -time.Second }},
		{"negative cpu budget", func(e *Execute) { e.CPUBudget = -time.Second }},
		{"bridge without token", func(e *Execute) { e.Bridge = &Bridge{Dir: t.TempDir()} }},
		{"bridge without dir", func(e *Execute) { e.Bridge = &Bridge{Token: "t"} }},
	}
	for _, tt := range tests {
		res := h.run(pid, "bad = 1", tt.mod)
		assert.Equal(t, ReasonInvalidRequest, res.Reason, tt.name)
		assert.True(t, res.StateRetained, tt.name)
		assert.Equal(t, "", res.RequestID, tt.name)
	}
	res := h.run(pid, "print('bad' in globals())")
	assert.Equal(t, "cell-1", res.RequestID, "no eval was written for an invalid request")
	assert.Equal(t, "False\n", res.Output.Text)
}

func TestQueueFullIsRefusedAndTheKernelUndisturbed(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) { o.MaxQueuedCells = 2 })
	pid := h.start()
	h.waitPhase(pid, PhaseIdle) // while starting, every cell waits in the queue
	g := newGate(t)
	active := h.submit(pid, g.wait())
	q1 := h.submit(pid, "a = 1")
	q2 := h.submit(pid, "b = 2")
	full := h.submit(pid, "c = 3")

	res := h.result(full)
	assert.Equal(t, ReasonQueueFull, res.Reason)
	assert.True(t, res.StateRetained)
	assert.Equal(t, "", res.RequestID)

	g.open()
	for _, r := range []<-chan CellResult{active, q1, q2} {
		assert.Equal(t, "", h.result(r).Reason)
	}
	assert.Equal(t, "True True False\n", h.run(pid, "print('a' in globals(), 'b' in globals(), 'c' in globals())").Output.Text)
	noSecondResult(t, full)
}

func TestCellCwdAppliesOnlyToItsCell(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	other := t.TempDir()
	res := h.run(pid, "import os\nprint(os.getcwd())", func(e *Execute) { e.Cwd = other })
	require.Equal(t, "", res.Reason, "%+v", res)
	assert.Equal(t, realPath(t, other), realPath(t, strings.TrimSpace(res.Output.Text)))

	res = h.run(pid, "import os\nprint(os.getcwd())")
	assert.Equal(t, realPath(t, h.opts.Cwd), realPath(t, strings.TrimSpace(res.Output.Text)))
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

func TestBridgeIsConfiguredForEachCellWithTheKernelDoorbells(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	show := "import exec_tools as m\nb = m._BRIDGE\nprint(b.dir, b.token, b.budget, b.gen, b.bells is not None)"
	d1, d2 := t.TempDir(), t.TempDir()

	res := h.run(pid, show, func(e *Execute) { e.Bridge = &Bridge{Dir: d1, Token: "tok-1", MaxTextBytes: 1000} })
	require.Equal(t, "", res.Reason, "%+v", res)
	assert.Equal(t, d1+" tok-1 1000 1 True\n", res.Output.Text)

	res = h.run(pid, show, func(e *Execute) { e.Bridge = &Bridge{Dir: d2, Token: "tok-2", MaxTextBytes: 2000} })
	require.Equal(t, "", res.Reason, "%+v", res)
	assert.Equal(t, d2+" tok-2 2000 2 True\n", res.Output.Text)

	res = h.run(pid, "import exec_tools as m\nprint(m._BRIDGE)")
	assert.Equal(t, "None\n", res.Output.Text, "a cell without a bridge reaches no earlier one")
}

func TestRequestBellRingsTheHost(t *testing.T) {
	h := newKernelHarness(t)
	handle := h.startHandle()
	wake, cancel := handle.Bells.Subscribe()
	defer cancel()
	res := h.run(handle.PID, "import os\nos.write(3, b'x')")
	require.Equal(t, "", res.Reason, "%+v", res)
	select {
	case <-wake:
	case <-time.After(hangGuard):
		t.Fatal("the kernel's fd 3 does not reach the request bell")
	}
}

func TestStagedWorkspaceIsPrivateAndGoneAfterStop(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	require.Equal(t, "", h.run(pid, "pass").Reason)

	ws := h.workspaces()
	require.Len(t, ws, 1)
	assertMode(t, ws[0], os.ModeDir|0o700)
	assertMode(t, filepath.Join(ws[0], "runner.py"), 0o600)
	assertMode(t, filepath.Join(ws[0], "exec_tools.py"), 0o600)
	runner, err := os.ReadFile(filepath.Join(ws[0], "runner.py"))
	require.NoError(t, err)
	assert.Equal(t, proc.Bootstrap+shimpy.Runner(), string(runner))
	helpers, err := os.ReadFile(filepath.Join(ws[0], "exec_tools.py"))
	require.NoError(t, err)
	assert.Equal(t, h.opts.HelperSource, string(helpers), "byte for byte")

	h.system.Root.Send(pid, &Stop{Reason: KilledByShutdown})
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
	require.Len(t, h.exitsSoFar(), 1)
	assert.Equal(t, telemetry.SessionCrashReason(""), h.exitsSoFar()[0].Crash, "stopped as asked")
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, want, fi.Mode(), path)
}

func TestDoneCellCancelsItsTimer(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	res := h.run(pid, "x = 1", withTimeout(time.Second))
	require.Equal(t, "", res.Reason, "%+v", res)
	time.Sleep(1200 * time.Millisecond) // past the timeout: it must not fire
	assert.Equal(t, PhaseIdle, h.status(pid).Phase)
	assert.Equal(t, "1\n", h.run(pid, "print(x)").Output.Text)
}

func TestQueuedCellGetsItsWholeTimeoutAfterWaiting(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	first := h.submit(pid, "import time\ntime.sleep(1.5)")
	second := h.submit(pid, "print('ran')", withTimeout(time.Second))
	require.Equal(t, "", h.result(first).Reason)
	res := h.result(second)
	require.Equal(t, "", res.Reason, "queue wait does not count against the cell timer: %+v", res)
	assert.Equal(t, "ran\n", res.Output.Text)
}

// A caller's deadline binds the cell wherever it is: queued past it, the
// cell is answered timeout without running and the kernel keeps its
// state; dispatched, its timer fires at the deadline however long its
// Timeout.
func TestADeadlineTimesOutAQueuedCellWithoutRunningIt(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	first := h.submit(pid, "import time\ntime.sleep(1)\nx = 1")
	queued := h.submit(pid, "open('ran', 'w').close()", withDeadline(time.Now().Add(200*time.Millisecond)))

	res := h.result(queued)
	assert.Equal(t, ReasonTimeout, res.Reason)
	assert.Equal(t, proc.KilledByTimeout, res.KilledBy)
	assert.True(t, res.StateRetained, "nothing of it ran")
	require.Equal(t, "", h.result(first).Reason)
	assert.NoFileExists(t, filepath.Join(h.opts.Cwd, "ran"))
	assert.Equal(t, "1\n", h.run(pid, "print(x)").Output.Text)

	started := time.Now()
	res = h.run(pid, "import time\ntime.sleep(600)", withDeadline(time.Now().Add(300*time.Millisecond)))
	assert.Equal(t, ReasonTimeout, res.Reason)
	assert.Less(t, time.Since(started), hangGuard/2, "the deadline, not the Timeout, ended the cell")
}

// A timed-out cell is answered once its kernel is gone: the process is
// dead when the result arrives.
func TestATimedOutCellIsAnsweredOnceItsKernelIsGone(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	kernel := pidLine(t, h.run(pid, "import os\nprint('leader', os.getpid())").Output.Text, "leader")
	res := h.run(pid, "import time\ntime.sleep(600)", withTimeout(300*time.Millisecond))
	assert.Equal(t, ReasonTimeout, res.Reason)
	assert.GreaterOrEqual(t, res.Duration, 300*time.Millisecond, "counted from the dispatch, where the timer started")
	assert.False(t, proctest.Alive(kernel), "the kernel outlived its timed-out cell's result")
}

func TestTimeoutRepliesPartialOutputAndDiscardsTheKernel(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	require.Equal(t, "", h.run(pid, "x = 1").Reason)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := filepath.Join(h.opts.Cwd, "evals")
	slow := h.submit(pid, "open('evals', 'a').write('x')\nprint('partial', flush=True)\nimport time\ntime.sleep(600)",
		withTimeout(time.Second), withCtx(ctx))
	queued := h.submit(pid, "print('never')")

	res := h.result(slow)
	assert.Equal(t, ReasonTimeout, res.Reason)
	assert.Equal(t, "cell-2", res.RequestID)
	assert.False(t, res.StateRetained)
	assert.Equal(t, proc.KilledByTimeout, res.KilledBy)
	assert.Equal(t, "partial\n", res.Output.Text)
	assert.GreaterOrEqual(t, res.Duration, time.Second-time.Millisecond)
	assert.Equal(t, 1, res.CellsCompleted)

	q := h.result(queued)
	assert.Equal(t, ReasonKernelDiscarded, q.Reason)
	assert.False(t, q.StateRetained)
	assert.Equal(t, "", q.RequestID)

	cancel() // a timed-out caller leaving later changes nothing
	h.waitGone(pid)
	noSecondResult(t, slow)
	noSecondResult(t, queued)
	assert.Empty(t, h.workspaces())
	evals, err := os.ReadFile(marker)
	require.NoError(t, err)
	assert.Equal(t, "x", string(evals), "the cell ran exactly once")
	assert.Equal(t, []string{"start", "stop:ok", "start", "stop:timeout", "cancel:timeout"}, h.cellEvents())
	require.Len(t, h.exitsSoFar(), 1)
	assert.Equal(t, telemetry.SessionCrashReason(""), h.exitsSoFar()[0].Crash, "the runner said bye")
}

func TestCellTimerRunsWithoutAStartedFrame(t *testing.T) {
	silent := `
import json, os, time
ctl = os.dup(1)
for line in os.fdopen(0, "rb"):
    if json.loads(line)["type"] == "init":
        os.write(ctl, b'\x1elemon-python\t{"v":1,"type":"ready"}\n')
    else:
        time.sleep(600)
`
	h := newKernelHarness(t, func(o *Options) { o.Runner = silent })
	pid := h.start()
	res := h.run(pid, "pass", withTimeout(300*time.Millisecond))
	assert.Equal(t, ReasonTimeout, res.Reason)
	assert.Equal(t, "cell-1", res.RequestID)
	assert.Equal(t, "", res.Output.Text)
	assert.GreaterOrEqual(t, res.Duration, 300*time.Millisecond-time.Millisecond)
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
}

func TestTimedOutSpilledCaptureIgnoresLateOutput(t *testing.T) {
	releasedc := make(chan string, 4)
	h := newKernelHarness(t, func(o *Options) {
		o.MaxOutputBytes = 100
		o.InterruptGrace = 2 * time.Second
		o.ReleaseSpill = func(p string) { releasedc <- p }
	})
	pid := h.start()
	code := `
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("x" * 1000, flush=True)
while True:
    print("y" * 100, flush=True)
    time.sleep(0.01)
`
	res := h.result(h.submit(pid, code, withTimeout(time.Second)))
	require.Equal(t, ReasonTimeout, res.Reason)
	assert.True(t, res.Output.Truncated)
	require.NotEmpty(t, res.Output.SpillPath)
	assert.Equal(t, h.root, filepath.Dir(res.Output.SpillPath), "spills live directly in the staging root")
	// Late stream frames kept arriving while the worker waited out the
	// interrupt grace, before the kernel's end let it answer; they were
	// dropped without harm.
	h.waitGone(pid)

	spill, err := os.ReadFile(res.Output.SpillPath)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(spill), strings.Repeat("x", 1000)+"\n"))
	assert.Equal(t, res.Output.TotalBytes, int64(len(spill)), "nothing was added after the timeout")
	require.Len(t, releasedc, 1, "the spill is released once")
	assert.Equal(t, res.Output.SpillPath, <-releasedc)
	assert.Equal(t, telemetry.CrashCancellationEscalation, h.exitsSoFar()[0].Crash)
}

func TestActiveCallerDeathDiscardsTheKernel(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	ctx, cancel := context.WithCancel(context.Background())
	g := newGate(t)
	active := h.submit(pid, g.wait()+"import time\ntime.sleep(600)", withCtx(ctx))
	queued := h.submit(pid, "print(1)")
	h.waitQueue(pid, 1)
	cancel()

	res := h.result(active)
	assert.Equal(t, ReasonInterrupted, res.Reason)
	assert.Equal(t, proc.KilledByCancelled, res.KilledBy)
	assert.False(t, res.StateRetained)
	assert.Equal(t, "cell-1", res.RequestID)
	assert.Equal(t, ReasonKernelDiscarded, h.result(queued).Reason)
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
	assert.Equal(t, []string{"start", "stop:interrupted", "cancel:caller_exit"}, h.cellEvents())
}

func TestQueuedCallerDeathOnlyRemovesItsCell(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	g := newGate(t)
	active := h.submit(pid, g.wait()+"y = 5")
	ctx, cancel := context.WithCancel(context.Background())
	queued := h.submit(pid, "marker = 1", withCtx(ctx))
	h.waitQueue(pid, 1)
	cancel()

	q := h.result(queued)
	assert.Equal(t, ReasonInterrupted, q.Reason)
	assert.True(t, q.StateRetained)
	assert.Equal(t, "", q.RequestID)
	h.waitQueue(pid, 0)

	g.open()
	require.Equal(t, "", h.result(active).Reason)
	res := h.run(pid, "print('marker' in globals(), y)")
	assert.Equal(t, "False 5\n", res.Output.Text)
	assert.Equal(t, []string{"start", "stop:ok", "start", "stop:ok"}, h.cellEvents())
}

func TestCallerGoneBeforeArrivalRunsNothing(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := h.run(pid, "ran = 1", withCtx(ctx))
	assert.Equal(t, ReasonInterrupted, res.Reason)
	assert.True(t, res.StateRetained)
	assert.Equal(t, "False\n", h.run(pid, "print('ran' in globals())").Output.Text)
}

func TestOsExitIsAPortExitForEveryCallerAndKillsTheGroup(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	require.Equal(t, "", h.run(pid, "x = 1").Reason)
	g := newGate(t)
	pids := filepath.Join(t.TempDir(), "pids")
	dying := h.submit(pid, g.wait()+`
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(`+quotePy(pids)+`, "w") as f:
    f.write("leader %d\ngrandchild %d\n" % (os.getpid(), child.pid))
os._exit(3)
`)
	queued := h.submit(pid, "print(x)")
	h.waitQueue(pid, 1)
	g.open()

	res := h.result(dying)
	assert.Equal(t, ReasonPortExit, res.Reason)
	assert.Equal(t, "cell-2", res.RequestID)
	assert.False(t, res.StateRetained)
	assert.Equal(t, "", res.KilledBy, "an exit status is not a kill")
	require.NotNil(t, res.Exit, "the exit status reaches the host")
	assert.Equal(t, 3, res.Exit.Code)
	assert.Equal(t, ReasonPortExit, h.result(queued).Reason)
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
	assert.Equal(t, []string{"start", "stop:ok", "start", "stop:port_exit", "cancel:shutdown"}, h.cellEvents())
	assert.Equal(t, telemetry.CrashPortExit, h.exitsSoFar()[0].Crash)

	// No survivors: the group is killed even though the runner died first.
	b, err := os.ReadFile(pids)
	require.NoError(t, err)
	proctest.Reap(t, pidLine(t, string(b), "grandchild"), hangGuard)
	assert.True(t, proctest.GroupGone(pidLine(t, string(b), "leader")), "no process of the kernel's group remains")
}

func TestSignalDeathNamesWhatKilledTheKernel(t *testing.T) {
	tests := []struct {
		name     string
		signal   string
		memoryMB int
		want     string
	}{
		{"sigkill", "SIGKILL", 0, proc.KilledBySignal},
		{"sigxcpu", "SIGXCPU", 0, proc.KilledByCPULimit},
		{"sigsegv under a memory limit", "SIGSEGV", 8192, proc.KilledByMemoryLimit},
		{"sigsegv", "SIGSEGV", 0, proc.KilledBySignal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newKernelHarness(t, func(o *Options) { o.Limits.MemoryMB = tt.memoryMB })
			pid := h.start()
			res := h.run(pid, "import os, signal\nos.kill(os.getpid(), signal."+tt.signal+")\nimport time\ntime.sleep(600)")
			assert.Equal(t, ReasonPortExit, res.Reason)
			assert.Equal(t, tt.want, res.KilledBy)
			h.waitGone(pid)
		})
	}
}

func TestStopWhileActiveInterruptsWithTheReason(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	g := newGate(t)
	active := h.submit(pid, g.wait()+"import time\ntime.sleep(600)")
	queued := h.submit(pid, "print(1)")
	h.waitQueue(pid, 1)
	h.system.Root.Send(pid, &Stop{Reason: KilledByOwnerGone})
	late := h.submit(pid, "print(2)")

	res := h.result(active)
	assert.Equal(t, ReasonInterrupted, res.Reason)
	assert.Equal(t, KilledByOwnerGone, res.KilledBy)
	assert.False(t, res.StateRetained)
	assert.Equal(t, "cell-1", res.RequestID)
	assert.Equal(t, ReasonShuttingDown, h.result(queued).Reason)
	assert.Equal(t, ReasonShuttingDown, h.result(late).Reason)
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
	assert.Equal(t, []string{"start", "cancel:shutdown", "stop:interrupted"}, h.cellEvents())
}

func TestActorStopFromOutsideStillAnswersAndCleansUp(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	leader := pidLine(t, h.run(pid, "import os\nprint('leader', os.getpid())").Output.Text, "leader")
	g := newGate(t)
	active := h.submit(pid, g.wait())
	queued := h.submit(pid, "pass")
	h.waitQueue(pid, 1)

	h.system.Root.Stop(pid)
	res := h.result(active)
	assert.Equal(t, ReasonInterrupted, res.Reason)
	assert.Equal(t, KilledByShutdown, res.KilledBy)
	assert.Equal(t, ReasonShuttingDown, h.result(queued).Reason)
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
	assert.True(t, proctest.GroupGone(leader), "no process of the kernel's group remains")
}

func TestSigintIgnoringCellEscalatesToKillAndLeavesNoProcess(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) {
		o.InterruptGrace, o.TermGrace, o.KillGrace = 200*time.Millisecond, 200*time.Millisecond, time.Second
	})
	pid := h.start()
	code := `
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    while True:
        time.sleep(1)
print("leader", os.getpid(), flush=True)
print("grandchild", child, flush=True)
while True:
    time.sleep(1)
`
	res := h.run(pid, code, withTimeout(2*time.Second))
	require.Equal(t, ReasonTimeout, res.Reason)
	leader := pidLine(t, res.Output.Text, "leader")
	grandchild := pidLine(t, res.Output.Text, "grandchild")
	h.waitGone(pid)
	proctest.Reap(t, grandchild, hangGuard)
	assert.True(t, proctest.GroupGone(leader), "no process of the kernel's group remains")
	assert.Empty(t, h.workspaces())
	assert.Equal(t, telemetry.CrashCancellationEscalation, h.exitsSoFar()[0].Crash)
}

func TestStopKillsAGrandchildInTheKernelGroup(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	res := h.run(pid, `
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("leader", os.getpid())
print("grandchild", child.pid)
`)
	require.Equal(t, "", res.Reason, "%+v", res)
	leader := pidLine(t, res.Output.Text, "leader")
	grandchild := pidLine(t, res.Output.Text, "grandchild")

	h.system.Root.Send(pid, &Stop{Reason: KilledByReset})
	h.waitGone(pid)
	proctest.Reap(t, grandchild, hangGuard)
	assert.True(t, proctest.GroupGone(leader), "no process of the kernel's group remains")
}

func TestLateOutputOfAnEarlierCellsThreadIsDroppedAndCounted(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	res := h.run(pid, `
import threading, time
def noisy():
    while True:
        print("late", flush=True)
        time.sleep(0.005)
threading.Thread(target=noisy, daemon=True).start()
time.sleep(0.05)
`)
	require.Equal(t, "", res.Reason, "%+v", res)
	res = h.run(pid, "import time\ntime.sleep(0.3)\nprint('mine')")
	require.Equal(t, "", res.Reason, "%+v", res)
	assert.Equal(t, "mine\n", res.Output.Text)
	assert.Positive(t, res.DroppedLateOutput)
}

func TestCPUBudgetKillsASpinningCellAndTheNextKernelWorks(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	require.Equal(t, "", h.run(pid, "x = 1").Reason)
	res := h.run(pid, "while True:\n    pass", withCPUBudget(time.Second))
	assert.Equal(t, ReasonPortExit, res.Reason)
	assert.Equal(t, proc.KilledByCPULimit, res.KilledBy)
	assert.False(t, res.StateRetained)
	h.waitGone(pid)

	next := h.start()
	res = h.run(next, "print('fresh')", withCPUBudget(time.Second))
	require.Equal(t, "", res.Reason, "%+v", res)
	assert.Equal(t, "fresh\n", res.Output.Text)
}

func TestCPUBudgetIsRenewedForEveryCell(t *testing.T) {
	h := newKernelHarness(t)
	pid := h.start()
	// Three cells of 0.7 s CPU each (2.1 s in all) outlast any single
	// one-second budget; each cell alone keeps a margin for the kernel's
	// own CPU, which a loaded machine inflates.
	spin := "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.7:\n    pass"
	for i := range 3 {
		res := h.run(pid, spin, withCPUBudget(time.Second))
		require.Equal(t, "", res.Reason, "cell %d: %+v", i+1, res)
	}
}

func TestStartupFailuresLeaveNothingBehind(t *testing.T) {
	t.Run("workspace", func(t *testing.T) {
		h := newKernelHarness(t, func(o *Options) {
			o.Workspace = func() (string, error) { return "", os.ErrPermission }
		})
		_, err := Start(h.system.Root, h.opts)
		require.ErrorIs(t, err, ErrStartupFailed)
		require.ErrorIs(t, err, os.ErrPermission)
	})
	t.Run("missing workspace directory", func(t *testing.T) {
		h := newKernelHarness(t, func(o *Options) {
			o.Workspace = func() (string, error) { return filepath.Join(t.TempDir(), "missing"), nil }
		})
		_, err := Start(h.system.Root, h.opts)
		require.ErrorIs(t, err, ErrStartupFailed)
		assert.Empty(t, h.workspaces())
	})
	t.Run("invalid options", func(t *testing.T) {
		h := newKernelHarness(t, func(o *Options) { o.Cwd = "" })
		_, err := Start(h.system.Root, h.opts)
		require.ErrorIs(t, err, ErrStartupFailed)
		assert.Empty(t, h.workspaces())
	})
	t.Run("missing interpreter", func(t *testing.T) {
		// The exec is the Spawner's own, so it fails the start itself.
		h := newKernelHarness(t, func(o *Options) { o.Interpreter = filepath.Join(t.TempDir(), "python3") })
		_, err := Start(h.system.Root, h.opts)
		require.ErrorIs(t, err, ErrStartupFailed)
		require.ErrorIs(t, err, syscall.ENOENT)
		assert.Empty(t, h.workspaces())
	})

	dying := []struct {
		name string
		mod  func(*Options)
	}{
		{"runner exits before ready", func(o *Options) { o.Runner = "import sys\nsys.exit(1)\n" }},
		{"runner never ready", func(o *Options) {
			o.Runner = "import time\ntime.sleep(600)\n"
			// Long enough for python's own start on a loaded machine (the
			// bound covers the spawn too), far below the runner's sleep.
			o.StartupTimeout = 3 * time.Second
		}},
		{"runner writes garbage", func(o *Options) { o.Runner = "import os, time\nos.write(1, b'garbage\\n')\ntime.sleep(600)\n" }},
	}
	for _, tt := range dying {
		t.Run(tt.name, func(t *testing.T) {
			h := newKernelHarness(t, tt.mod)
			handle, err := h.tryStartHandle()
			if err != nil {
				// A runner that dies at once can be gone before Start
				// has handed it its first line: the start fails itself,
				// as a startup failure, and leaves nothing either.
				require.ErrorIs(t, err, ErrStartupFailed)
				assert.Empty(t, h.workspaces())
				return
			}
			pid := handle.PID
			res := h.run(pid, "print(1)")
			assert.Equal(t, ReasonStartupFailed, res.Reason)
			assert.False(t, res.StateRetained)
			h.waitGone(pid)
			assert.Empty(t, h.workspaces())
			require.Len(t, h.exitsSoFar(), 1)
			assert.Equal(t, telemetry.CrashStartupFailure, h.exitsSoFar()[0].Crash)
			assert.Empty(t, h.cellEvents(), "no cell started")
		})
	}
}
