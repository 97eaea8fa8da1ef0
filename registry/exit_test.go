package registry

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

// exitBook stands in for the workers' OnExit reports.
type exitBook struct {
	mu    sync.Mutex
	exits map[string]kernelworker.Exit
	asked int
}

func (b *exitBook) set(pid *actor.PID, e kernelworker.Exit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.exits[pidKey(pid)] = e
}

func (b *exitBook) exitOf(pid *actor.PID) (kernelworker.Exit, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	e, ok := b.exits[pidKey(pid)]
	delete(b.exits, pidKey(pid))
	return e, ok
}

// A kernel that ended on its own is reported by why it
// ended: a crash reason as session.crash, a self-stop as asked (the bye
// after a cancellation) as session.stop shutdown, no report as
// session.crash unknown. live_kernels is exact.
func TestAKernelThatEndedOnItsOwnIsReportedByItsExit(t *testing.T) {
	cases := map[string]struct {
		exit  *kernelworker.Exit
		event telemetry.Event
	}{
		"port exit": {&kernelworker.Exit{Crash: telemetry.CrashPortExit},
			telemetry.SessionCrash{Duration: time.Minute, LiveKernels: 1, Capacity: 16, Reason: telemetry.CrashPortExit}},
		"escalation": {&kernelworker.Exit{Crash: telemetry.CrashCancellationEscalation},
			telemetry.SessionCrash{Duration: time.Minute, LiveKernels: 1, Capacity: 16, Reason: telemetry.CrashCancellationEscalation}},
		"stopped as asked": {&kernelworker.Exit{},
			telemetry.SessionStop{Duration: time.Minute, LiveKernels: 1, Capacity: 16, Reason: telemetry.StopShutdown}},
		"no report": {nil,
			telemetry.SessionCrash{Duration: time.Minute, LiveKernels: 1, Capacity: 16, Reason: telemetry.CrashUnknown}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			book := &exitBook{exits: map[string]kernelworker.Exit{}}
			h := newHarness(t, func(cfg *Config) { cfg.ExitOf = book.exitOf })
			owner := h.newOwner()
			h.mustAcquire(h.key("survivor"), owner)
			dying := h.mustAcquire(h.key("dying"), owner)
			h.clock.Advance(time.Minute)
			if c.exit != nil {
				book.set(dying.Worker.PID(), *c.exit)
			}
			h.sys.Root.Send(dying.Worker.PID(), fakeDie{})
			h.eventually(func() bool { return h.snapshot().Live == 1 }, "the dead kernel leaves the live set")
			evs := h.rec.Events()
			assert.Equal(t, c.event, evs[len(evs)-1])
			book.mu.Lock()
			defer book.mu.Unlock()
			assert.Empty(t, book.exits, "every report is forgotten once read")
		})
	}
}

func TestAStoppedKernelKeepsItsStopReasonWhateverItsExit(t *testing.T) {
	book := &exitBook{exits: map[string]kernelworker.Exit{}}
	h := newHarness(t, func(cfg *Config) { cfg.ExitOf = book.exitOf })
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner)
	book.set(a.Worker.PID(), kernelworker.Exit{Crash: telemetry.CrashPortExit})
	h.detach(owner)
	h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 1 }, "stop reported")
	assert.Equal(t, telemetry.StopOwnerDetached, events[telemetry.SessionStop](h)[0].Reason)
	assert.Empty(t, events[telemetry.SessionCrash](h))
	book.mu.Lock()
	defer book.mu.Unlock()
	assert.Empty(t, book.exits)
}

// An eviction is reported when admission decides it, like a reap; the
// stop follows when the worker is gone.
func TestAnEvictionIsReportedAtTheDecision(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner, withMax(1))
	require.NoError(t, h.release(a.Lease))
	h.clock.Advance(90 * time.Second)
	h.mustAcquire(h.key("b"), owner, withMax(1))
	evicts := events[telemetry.SessionEvict](h)
	require.Len(t, evicts, 1)
	assert.Equal(t, telemetry.SessionEvict{Idle: 90 * time.Second, LiveKernels: 0, Capacity: 1}, evicts[0])
	h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 1 }, "stop reported")
	names := []string{}
	for _, e := range h.rec.Events() {
		names = append(names, e.Name())
	}
	// The new kernel starts while the evicted one stops: the registry
	// does not wait for either, so those two may come in either order.
	require.Len(t, names, 4)
	assert.Equal(t, []string{"coding_agent.python_repl.session.start", "coding_agent.python_repl.session.evict"}, names[:2])
	assert.ElementsMatch(t, []string{"coding_agent.python_repl.session.start", "coding_agent.python_repl.session.stop"}, names[2:])
}

func TestSnapshotCountsQueuedCells(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	busy := h.mustAcquire(h.key("busy"), owner)
	for range 3 { // one active, two queued
		h.execute(busy)
	}
	other := h.mustAcquire(h.key("other"), owner)
	for range 2 { // one active, one queued
		h.execute(other)
	}
	h.eventually(func() bool { s := h.snapshot(); return s.QueuedCells == 3 }, "queued cells counted")
	s := h.snapshot()
	assert.Equal(t, 2, s.DeepestQueue)
	assert.Equal(t, 2, s.Phases["running"])
}
