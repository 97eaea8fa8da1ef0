package executecode_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/introspect"
)

// Each test drives real python3 kernels through one path and checks the
// exact event sequence of docs/architecture.md, Telemetry, live counts
// included (docs/architecture.md, Rules: exact counts).

func TestAPerCallRunEmitsOneStopAndNoKernelEvent(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	writeFile(t, r.root, "a.txt", "a")
	r.run(nil, "read('a.txt')\ntext('ok')")
	r.expectTrace("execute_code.stop")
	assert.Empty(t, r.rt.Lifecycle(), "execute_code.stop is not a python_repl event")
}

func TestCellsEmitStartAndStopWithTheirOutcome(t *testing.T) {
	r := newRig(t)
	o := r.attach("s1")
	r.run(o, "x = 1")
	r.run(o, "x += 1")
	r.run(o, "raise KeyError(x)")
	r.expectTrace(
		"session.start live=1", "cell.start", "cell.stop(ok)",
		"cell.start", "cell.stop(ok)",
		"cell.start", "cell.stop(exception)",
	)
	var got []string
	for _, e := range r.rt.Lifecycle() {
		assert.Equal(t, introspect.Kind, e.Kind)
		got = append(got, e.Event)
	}
	assert.Equal(t, []string{"session_started", "cell_started", "cell_stopped", "cell_started", "cell_stopped",
		"cell_started", "cell_stopped"}, got)
}

// A timeout is cell.stop(timeout) then cell.cancel(timeout);
// the kernel then stops itself as asked after the interrupt, which is a
// session.stop, not a crash.
func TestATimedOutCellIsStoppedThenCancelledAndItsKernelStops(t *testing.T) {
	r := newRig(t)
	o := r.attach("s1")
	r.run(o, "import time\ntime.sleep(60)", 1000)
	r.expectTrace(
		"session.start live=1", "cell.start", "cell.stop(timeout)", "cell.cancel(timeout)",
		"session.stop(shutdown) live=0",
	)
}

// A caller that goes away under its running cell: cell.stop(interrupted),
// cell.cancel(caller_exit), and the discarded kernel stops as asked.
func TestACallerGoneUnderItsCellIsInterruptedThenCancelled(t *testing.T) {
	r := newRig(t)
	o := r.attach("s1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan executecode.Result, 1)
	go func() {
		res, err := r.rt.Execute(ctx, executecode.Call{Script: "import time\nopen('started', 'w').close()\ntime.sleep(60)", Owner: o})
		assert.ErrorIs(t, err, context.Canceled)
		done <- res
	}()
	// Cancelled once the cell's code runs: a SIGINT that lands while the
	// runner is still setting the cell up kills the interpreter instead
	// (a crash, port_exit).
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(r.root, "started")); return err == nil },
		waitFor, 5*time.Millisecond, "the cell runs")
	cancel()
	res := <-done
	assert.Equal(t, executecode.KilledByCancelled, res.Details.KilledBy)
	r.expectTrace("session.start live=1", "cell.start", "cell.stop(interrupted)", "cell.cancel(caller_exit)",
		"session.stop(shutdown) live=0")
}

// A kernel that dies under a cell: cell.stop(port_exit), cell.cancel
// (shutdown), then session.crash(port_exit) with the exact live count of
// the kernels that are left.
func TestACrashedKernelIsReportedWithItsReasonAndTheExactLiveCount(t *testing.T) {
	r := newRig(t)
	survivor, victim := r.attach("survivor"), r.attach("victim")
	r.run(survivor, "x = 1")
	r.run(victim, "y = 1")
	res := r.run(victim, "import os\nos._exit(3)")
	assert.Equal(t, executecode.ReasonPortExit, res.Details.Reason)
	r.expectTrace(
		"session.start live=1", "cell.start", "cell.stop(ok)",
		"session.start live=2", "cell.start", "cell.stop(ok)",
		"cell.start", "cell.stop(port_exit)", "cell.cancel(shutdown)", "session.crash(port_exit) live=1",
	)
	s := r.snapshot()
	assert.Equal(t, 1, s.Capacity.Live)
	assert.Equal(t, 1, s.Phases["idle"])
	entries := r.rt.Lifecycle()
	last := entries[len(entries)-1]
	assert.Equal(t, "session_crashed", last.Event)
	assert.Equal(t, int64(1), last.Measurements["live_kernels"])
	assert.Equal(t, "port_exit", last.Metadata["reason"])
}

func TestDetachResetAndEvictionStopKernelsWithTheirReason(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.MaxLiveKernels = 1 }))
	a := r.attach("a")
	r.run(a, "x = 1")
	_, err := r.rt.Execute(context.Background(), executecode.Call{Script: "x = 2", Owner: a, Reset: true})
	require.NoError(t, err)
	r.expectTrace(
		"session.start live=1", "cell.start", "cell.stop(ok)",
		"session.stop(reset) live=0", "session.start live=1", "cell.start", "cell.stop(ok)",
	)

	// The cap is 1: b's first call evicts a's idle kernel. The eviction
	// is decided before b's kernel starts; the evicted kernel's stop
	// lands whenever its worker is gone.
	m := r.mark()
	b := r.attach("b")
	r.run(b, "y = 1")
	r.expectSince(m, false, "session.evict live=0", "session.start live=1", "cell.start", "cell.stop(ok)",
		"session.stop(capacity_eviction) live=1")
	trace := r.trace()[m:]
	assert.Less(t, slices.Index(trace, "session.evict live=0"), slices.Index(trace, "session.start live=1"))

	m = r.mark()
	require.NoError(t, b.Detach(context.Background()))
	r.expectSince(m, true, "session.stop(owner_detached) live=0")
	assert.Equal(t, 0, r.snapshot().Capacity.Live)
}

func TestAnIdleKernelIsReapedThenStopped(t *testing.T) {
	r := newRig(t,
		withCfg(func(c *config.Config) { c.KernelIdleTimeoutMS = 50 }),
		beforeUse(func(rt *executecode.Runtime) { executecode.SetReapInterval(rt, 20*time.Millisecond) }))
	o := r.attach("s1")
	r.run(o, "x = 1")
	r.expectTrace("session.start live=1", "cell.start", "cell.stop(ok)",
		"session.reap(idle) live=0", "session.stop(shutdown) live=0")
	s := r.snapshot()
	assert.Equal(t, int64(50), s.Reap.IdleTimeoutMS, "the settings in effect")
	assert.Equal(t, int64(20), s.Reap.IntervalMS)
}

// Every fallback is emitted with its reason by the facade,
// and the isolated run emits its own execute_code.stop.
func TestEveryFallbackIsEmittedWithItsReason(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.MaxLiveKernels = 1 }))
	res := r.run(nil, "text('alone')")
	assert.Equal(t, executecode.FallbackMissingScope, res.Details.FallbackReason)
	r.expectTrace("fallback(missing_session_scope)", "execute_code.stop")

	busy, other := r.attach("busy"), r.attach("other")
	release := writeFile(t, r.root, "hold", "")
	done := make(chan executecode.Result, 1)
	go func() {
		done <- r.goRun(busy, "import os, time\nwhile os.path.exists('hold'):\n    time.sleep(0.01)\n")
	}()
	r.waitSnapshot(func(s executecode.Snapshot) bool { return s.Phases["running"] == 1 }, "the busy cell runs")
	res = r.run(other, "text('isolated')")
	assert.Equal(t, executecode.FallbackCapacityExhausted, res.Details.FallbackReason)
	require.NoError(t, removeFile(release))
	<-done
	r.expectTrace("fallback(missing_session_scope)", "execute_code.stop",
		"session.start live=1", "cell.start",
		"fallback(capacity_exhausted)", "execute_code.stop",
		"cell.stop(ok)")
}

// One bridge.deny (reason authentication) per request that fails
// authentication, in both modes, besides the denied calls in details.
func TestEachForgedRequestIsABridgeDenialInBothModes(t *testing.T) {
	const forge = `
import json, os, time, exec_tools
B = exec_tools._BRIDGE
for i, token in enumerate(["forged", None], start=900):
    p = os.path.join(B.dir, "req-%d.json" % i)
    with open(p + ".x", "w") as f:
        f.write(json.dumps({"id": i, "token": token, "tool": "read", "params": {}}))
    os.replace(p + ".x", p)
    while not os.path.exists(os.path.join(B.dir, "res-%d.json" % i)):
        time.sleep(0.005)
text("done")
`
	r := newRig(t)
	o := r.attach("s1")
	res := r.run(o, forge)
	assert.Equal(t, []string{"done"}, res.Blocks)
	assert.Equal(t, 2, res.Details.RPCDenied)
	r.expectTrace("session.start live=1", "cell.start", "bridge.deny", "bridge.deny", "cell.stop(ok)")

	perCall := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	res = perCall.run(nil, forge)
	assert.Equal(t, 2, res.Details.RPCDenied)
	perCall.expectTrace("bridge.deny", "bridge.deny", "execute_code.stop")
}

func TestApprovalPromptsEmitRequestedThenResolved(t *testing.T) {
	var mu sync.Mutex
	asked := 0
	approver := approval.ApproverFunc(func(_ context.Context, req approval.Request) (approval.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		if asked == 1 {
			return approval.ApproveOnce, nil
		}
		return approval.Deny, nil
	})
	r := newRig(t,
		withCfg(func(c *config.Config) { c.KernelMode = config.PerCall; c.RequireApproval = []string{"read"} }),
		withOption(executecode.WithApprover(approver)))
	writeFile(t, r.root, "a.txt", "a")
	res := r.run(nil, "read('a.txt')\ntry:\n    read('a.txt')\nexcept ToolError:\n    pass\n")
	assert.Equal(t, 1, res.Details.RPCDenied)
	r.expectTrace("approvals.requested(read)", "approvals.resolved(read,approve_once)",
		"approvals.requested(read)", "approvals.resolved(read,deny)", "execute_code.stop")
}

// Close stops every kernel as a shutdown: each start has its stop, on the
// bus and in Lifecycle, so a shutdown never looks like a leak.
func TestCloseStopsEveryKernelWithAShutdownStop(t *testing.T) {
	r := newRig(t)
	a, b := r.attach("a"), r.attach("b")
	r.run(a, "x = 1")
	r.run(b, "y = 1")
	m := r.mark()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, r.rt.Close(ctx))
	trace := r.trace()[m:]
	slices.Sort(trace)
	assert.Equal(t, []string{"session.stop(shutdown) live=0", "session.stop(shutdown) live=0"}, trace)
	count := map[string]int{}
	for _, e := range r.rt.Lifecycle() {
		count[e.Event]++
		if e.Event == "session_stopped" {
			assert.Equal(t, "shutdown", e.Metadata["reason"])
		}
	}
	assert.Equal(t, 2, count["session_started"])
	assert.Equal(t, 2, count["session_stopped"])
}
