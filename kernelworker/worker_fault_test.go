package kernelworker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/telemetry"
)

// Protocol faults, injected through the fake runner: every one discards
// the kernel, answers the active and queued callers protocol_fault, and
// leaves no process and no workspace.
func TestProtocolFaultsDiscardTheKernel(t *testing.T) {
	tests := []struct {
		name, code string
	}{
		{"garbage line", `raw(b"garbage\n")`},
		{"bytes without newline that cannot be a frame", `raw(b"\x1elemon-pythoX")`},
		{"oversized frame", `raw(b"\x1elemon-python\t{" + b"x" * 300000 + b"}\n")`},
		{"invalid json", `raw(b"\x1elemon-python\t{nope}\n")`},
		{"float version", `raw(b'\x1elemon-python\t{"v":1.0,"type":"done","id":"' + cell.encode() + b'"}\n')`},
		{"unknown frame type", `frame(type="wake")`},
		{"done for another cell", `frame(type="done", id="cell-99")`},
		{"stream for another cell", `frame(type="stream", id="cell-99", stream="stdout", data="eA==")`},
		{"second started", `frame(type="started", id=cell)`},
		{"second ready", `frame(type="ready")`},
		{"bye while running", `frame(type="bye")`},
		{"fatal", `frame(type="fatal", reason="runner gave up")`},
		{"base64 with a newline", `frame(type="stream", id=cell, stream="stdout", data="eA==\n")`},
		{"stream chunk over the cap", `import base64; frame(type="stream", id=cell, stream="stdout", data=base64.b64encode(b"x" * 65537).decode())`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newKernelHarness(t, func(o *Options) { o.Runner = fakeRunner(t) })
			pid := h.start()
			leader := pidLine(t, h.run(pid, `out("leader %d\n" % os.getpid())`).Output.Text, "leader")
			g := newGate(t)
			active := h.submit(pid, "gate("+quotePy(g.path)+")\n"+tt.code+"\nimport time\ntime.sleep(600)")
			queued := h.submit(pid, "pass")
			h.waitQueue(pid, 1)
			g.open()

			res := h.result(active)
			assert.Equal(t, ReasonProtocolFault, res.Reason)
			assert.Equal(t, KilledByProtocolFault, res.KilledBy)
			assert.False(t, res.StateRetained)
			assert.Equal(t, "cell-2", res.RequestID)
			assert.Equal(t, ReasonProtocolFault, h.result(queued).Reason)
			h.waitGone(pid)
			assert.True(t, proctest.GroupGone(leader), "the kernel's process group is gone")
			assert.Empty(t, h.workspaces())
			assert.Equal(t, []string{"start", "stop:ok", "start", "stop:protocol_fault", "cancel:shutdown"}, h.cellEvents())
			require.Len(t, h.exitsSoFar(), 1)
			assert.Equal(t, telemetry.CrashProtocolFault, h.exitsSoFar()[0].Crash)
		})
	}
}

func quotePy(s string) string {
	// Test paths are plain: a Go quoted string is a valid python literal.
	return `"` + s + `"`
}

func TestRunnerDyingMidFrameIsAPortExit(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) { o.Runner = fakeRunner(t) })
	pid := h.start()
	res := h.run(pid, `raw(b'\x1elemon-python\t{"v":1,"type":"do')`+"\nos._exit(3)")
	assert.Equal(t, ReasonPortExit, res.Reason)
	assert.False(t, res.StateRetained)
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
}

func TestFrameWhileIdleIsAProtocolFault(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) { o.Runner = fakeRunner(t) })
	pid := h.start()
	g := newGate(t)
	res := h.run(pid, `import threading
def late():
    gate(`+quotePy(g.path)+`)
    frame(type="started", id="cell-7")
threading.Thread(target=late, daemon=True).start()`)
	require.Equal(t, "", res.Reason, "%+v", res)
	h.waitPhase(pid, PhaseIdle)
	g.open()
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
	assert.Equal(t, telemetry.CrashProtocolFault, h.exitsSoFar()[0].Crash)
}

func TestFaultWhileCancellingEndsTheGraceEarly(t *testing.T) {
	// The cell ignores SIGINT and, once timed out, writes garbage: the
	// worker, cancelling, treats it as a fault and tears down at once
	// instead of waiting out the interrupt grace.
	h := newKernelHarness(t, func(o *Options) {
		o.Runner = fakeRunner(t)
		o.InterruptGrace = time.Minute
	})
	pid := h.start()
	g := newGate(t)
	slow := h.submit(pid, `import signal, threading
signal.signal(signal.SIGINT, signal.SIG_IGN)
def late():
    gate(`+quotePy(g.path)+`)
    raw(b"garbage\n")
threading.Thread(target=late, daemon=True).start()
import time
time.sleep(600)`, withTimeout(300*time.Millisecond))
	h.waitPhase(pid, PhaseCancelling)
	// The timed-out cell's answer waits for its kernel's end, which only
	// the fault brings before the minute's grace.
	g.open()
	res := h.result(slow)
	require.Equal(t, ReasonTimeout, res.Reason)
	h.waitGone(pid)
	assert.Equal(t, []string{"start", "stop:timeout", "cancel:timeout"}, h.cellEvents(), "one stop and one cancel per cell")
}

// What a kernel wrote behind fds 1 and 2 and its runner never drained
// reaches the open cell when the kernel dies: the host owns that pipe and
// reads what is left once the kernel is gone. The fake runner never
// drains it at all, so the bytes can only come from the host's read.
func TestWhatADeadKernelNeverDrainedReachesItsCell(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) { o.Runner = fakeRunner(t) })
	pid := h.start()
	res := h.run(pid, "out('framed\\n')\nos.write(6, b'never drained\\n')\nimport signal\nos.kill(os.getpid(), signal.SIGKILL)")
	assert.Equal(t, ReasonPortExit, res.Reason)
	assert.Equal(t, "framed\nnever drained\n", res.Output.Text, "in the order written")
	h.waitGone(pid)
	assert.Empty(t, h.workspaces())
}
