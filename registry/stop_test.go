package registry

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

// A Terminated that the system did not send (the worker is alive) or for an
// actor the registry does not know changes nothing.
func TestForgedOrStaleTerminatedChangesNothing(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	al := h.mustAcquire(h.key("s"), owner)
	before := h.snapshot()

	h.sys.Root.Send(h.reg, &actor.Terminated{Who: al.Worker.PID()})
	h.sys.Root.Send(h.reg, &actor.Terminated{Who: owner})
	h.sys.Root.Send(h.reg, &actor.Terminated{Who: actor.NewPID(al.Worker.PID().Address, "no-such-actor")})
	h.sys.Root.Send(h.reg, &actor.Terminated{})
	assert.Equal(t, before, h.snapshot())
	assert.True(t, h.alive(al.Worker.PID()))
	assert.Empty(t, events[telemetry.SessionCrash](h))
	assert.NoError(t, h.release(al.Lease))
}

// Snapshot and telemetry stay exact when workers die on their own
// (a crash's live_kernels is the exact live count).
func TestWorkerDyingOnItsOwnIsDroppedWithExactCounts(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	var allocs []Allocation
	for _, s := range []string{"a", "b", "c"} {
		allocs = append(allocs, h.mustAcquire(h.key(s), owner))
	}
	require.NoError(t, h.release(allocs[0].Lease))

	h.sys.Root.Send(allocs[1].Worker.PID(), fakeDie{})
	h.eventually(func() bool { return h.snapshot().Live == 2 }, "crashed kernel dropped")
	s := h.snapshot()
	assert.Equal(t, 1, s.InflightCells, "the dead kernel's lease is gone")
	assert.Equal(t, 2, s.Phases["idle"])
	assert.Equal(t, 0, s.Phases["unreachable"])
	assert.Equal(t, 14, s.Available)
	crash := events[telemetry.SessionCrash](h)
	require.Len(t, crash, 1)
	assert.Equal(t, 2, crash[0].LiveKernels)
	assert.Equal(t, telemetry.CrashUnknown, crash[0].Reason)
	assert.Error(t, allocs[1].Lease.Context().Err())
	assert.NoError(t, h.release(allocs[1].Lease), "releasing the dead kernel's lease is harmless")

	// The key gets a fresh kernel.
	again := h.mustAcquire(h.key("b"), owner)
	assert.Equal(t, uint64(4), again.Generation)
}

// A stop that fails leaves the registry responsive, counts the worker
// unreachable, emits stop_failed, and is retried at reap ticks; a slow stop
// blocks nothing else.
func TestAWedgedWorkerNeverBlocksTheRegistry(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StopTimeout = 20 * time.Millisecond })
	wedge := make(chan struct{})
	h.onStart = func(gen uint64, w *fakeWorker) {
		if gen == 1 {
			w.wedge = wedge
		}
	}
	owner := h.newOwner()
	k := h.key("s")
	first := h.mustAcquire(k, owner)
	require.NoError(t, h.release(first.Lease))

	rr := h.reset(k, owner) // the worker blocks inside its Stop
	assert.ErrorIs(t, rr.Err, ErrStopFailed)
	s := h.snapshot()
	assert.Equal(t, 0, s.Live)
	assert.Equal(t, 1, s.Phases["unreachable"], "a quarantined worker counts as unreachable")
	assert.Len(t, events[telemetry.Fallback](h), 1)

	other := h.mustAcquire(h.key("other"), owner)
	assert.Equal(t, uint64(2), other.Generation)
	again := h.mustAcquire(k, owner)
	assert.Equal(t, uint64(3), again.Generation)
	h.reapOnce() // retries the stop; the worker is still wedged
	assert.Equal(t, 1, h.snapshot().Phases["unreachable"])

	close(wedge)
	h.waitGone(first.Worker.PID())
	h.eventually(func() bool { return h.snapshot().Phases["unreachable"] == 0 }, "quarantine cleared")
	stops := events[telemetry.SessionStop](h)
	require.Len(t, stops, 1)
	assert.Equal(t, telemetry.StopReset, stops[0].Reason)
	assert.Equal(t, 2, stops[0].LiveKernels)
}

func TestStoppingTheRegistryStopsEveryKernelAndEndsLeases(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner)
	b := h.mustAcquire(h.key("b"), owner)
	require.NoError(t, h.sys.Root.StopFuture(h.reg).Wait())
	h.waitGone(a.Worker.PID())
	h.waitGone(b.Worker.PID())
	assert.Equal(t, []string{"shutdown"}, h.stopsOf(1))
	assert.Equal(t, []string{"shutdown"}, h.stopsOf(2))
	assert.ErrorIs(t, a.Lease.Context().Err(), context.Canceled)
}

// Stale timer messages (an old reap timer, an old stop deadline) are
// matched on their token and ignored.
func TestStaleTimerMessagesChangeNothing(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	al := h.mustAcquire(h.key("s"), owner, withIdle(time.Minute))
	require.NoError(t, h.release(al.Lease))
	h.clock.Advance(time.Hour)
	before := h.snapshot()

	h.sys.Root.Send(h.reg, reapTick{token: 999})
	h.sys.Root.Send(h.reg, stopExpired{worker: pidKey(al.Worker.PID()), token: 999})
	h.sys.Root.Send(h.reg, callerDone{lease: 999})
	assert.Equal(t, before, h.snapshot())
	assert.Empty(t, h.stopsOf(1), "a stale reap tick reaps nothing")
	assert.True(t, h.alive(al.Worker.PID()))
}

func TestStoppingTheRegistryAnswersAPendingReset(t *testing.T) {
	h := newHarness(t)
	wedge := make(chan struct{})
	h.onStart = func(_ uint64, w *fakeWorker) { w.wedge = wedge }
	owner := h.newOwner()
	k := h.key("s")
	h.mustAcquire(k, owner)

	pending := h.sys.Root.RequestFuture(h.reg, &resetMsg{Key: k, Owner: owner}, askTimeout)
	h.eventually(func() bool { return len(h.stopsOf(1)) == 1 }, "worker told to stop")
	require.NoError(t, h.sys.Root.StopFuture(h.reg).Wait())
	res, err := pending.Result()
	require.NoError(t, err)
	rr, ok := res.(*resetReply)
	require.True(t, ok)
	assert.ErrorIs(t, rr.Err, ErrStopFailed)
	close(wedge)
	h.waitGone(h.worker(1))
}
