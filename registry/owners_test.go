package registry

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

// departures are the two ways an owner leaves: explicit detach and death
// (its actor stops and the registry gets Terminated). They must act the
// same.
var departures = map[string]func(h *harness, owner *actor.PID){
	"detach": func(h *harness, owner *actor.PID) { h.detach(owner) },
	"death":  func(h *harness, owner *actor.PID) { h.kill(owner); h.sync() },
}

func TestOwnerLeavingAQuiescentSharedKernelOnlyRemovesItself(t *testing.T) {
	for name, leave := range departures {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			a, b := h.newOwner(), h.newOwner()
			k := h.key("s")
			la := h.mustAcquire(k, a)
			lb := h.mustAcquire(k, b)
			require.NoError(t, h.release(la.Lease))
			require.NoError(t, h.release(lb.Lease))

			leave(h, a)
			h.eventually(func() bool { return h.snapshot().Owners == 1 }, "one owner left")
			assert.Equal(t, 1, h.snapshot().Live)
			assert.Empty(t, h.stopsOf(1))
			again := h.mustAcquire(k, b)
			assert.True(t, again.Reused)
			assert.Equal(t, la.Worker.PID(), again.Worker.PID())
		})
	}
}

func TestLastOwnerLeavingStopsTheKernelAndClearsBookkeeping(t *testing.T) {
	for name, leave := range departures {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			owner := h.newOwner()
			al := h.mustAcquire(h.key("s"), owner)
			require.NoError(t, h.release(al.Lease))

			leave(h, owner)
			h.waitStops(1, "owner_gone")
			h.waitGone(al.Worker.PID())
			h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 1 }, "stop event")
			stop := events[telemetry.SessionStop](h)[0]
			assert.Equal(t, telemetry.StopOwnerDetached, stop.Reason)
			assert.Equal(t, 0, stop.LiveKernels)
			s := h.snapshot()
			assert.Equal(t, 0, s.Live)
			assert.Equal(t, 0, s.Owners)
			assert.Equal(t, 0, s.ForkedOwners)
			assert.Equal(t, 0, s.InflightCells)
			assert.Equal(t, 0, s.Phases["unreachable"])
		})
	}
}

// A departing owner's queued cell leaves the queue, the kernel
// and the co-owner's active cell are untouched.
func TestOwnerLeavingWithAQueuedCellRemovesOnlyThatCell(t *testing.T) {
	for name, leave := range departures {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			a, b := h.newOwner(), h.newOwner()
			k := h.key("s")
			lb := h.mustAcquire(k, b)
			la := h.mustAcquire(k, a)
			replyB := h.execute(lb) // active
			replyA := h.execute(la) // queued behind b's cell
			h.do(1, func(w *fakeWorker) {
				require.NotNil(t, w.active)
				require.Len(t, w.queue, 1)
			})

			leave(h, a)
			resA := h.recv(replyA)
			assert.Equal(t, "interrupted", resA.Reason, "a's queued cell left the queue")
			assert.ErrorIs(t, context.Cause(la.Lease.Context()), ErrOwnerGone)
			assert.NoError(t, lb.Lease.Context().Err())

			h.finish(1)
			resB := h.recv(replyB)
			assert.Empty(t, resB.Reason, "b's cell completed on the kept kernel")
			assert.Empty(t, h.stopsOf(1))
			s := h.snapshot()
			assert.Equal(t, 1, s.Live)
			assert.Equal(t, 1, s.Owners)
			assert.Equal(t, 1, s.InflightCells, "only b's lease remains")
			require.NoError(t, h.release(lb.Lease))
			assert.NoError(t, h.release(la.Lease))
		})
	}
}

// If the departing owner's cell is the active one, the kernel
// is discarded (for every co-owner).
func TestOwnerLeavingWhileItsCellIsActiveDiscardsTheKernel(t *testing.T) {
	for name, leave := range departures {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			a, b := h.newOwner(), h.newOwner()
			k := h.key("s")
			la := h.mustAcquire(k, a)
			lb := h.mustAcquire(k, b)
			h.execute(la) // active
			replyB := h.execute(lb)
			h.do(1, func(*fakeWorker) {})

			leave(h, a)
			assert.Equal(t, kernelworker.ReasonKernelDiscarded, h.recv(replyB).Reason)
			h.waitGone(la.Worker.PID())
			h.eventually(func() bool { return h.snapshot().Live == 0 }, "kernel dropped")
			assert.Empty(t, h.stopsOf(1), "the worker discarded itself; the registry sent no Stop")
			crash := events[telemetry.SessionCrash](h)
			require.Len(t, crash, 1)
			assert.Equal(t, 0, crash[0].LiveKernels)

			next := h.mustAcquire(k, b)
			assert.Equal(t, uint64(2), next.Generation)
			assert.False(t, next.Reused)
		})
	}
}

func TestDetachOfAnUnknownOwnerIsANoop(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	al := h.mustAcquire(h.key("s"), owner)
	h.detach(h.newOwner())
	h.detach(nil)
	s := h.snapshot()
	assert.Equal(t, 1, s.Owners)
	assert.Equal(t, 1, s.InflightCells)
	assert.True(t, h.alive(al.Worker.PID()))
}

// An owner that is already dead when it first acquires is noticed at
// once (watching a dead actor yields Terminated): its kernel stops.
func TestAcquireForADeadOwnerEndsWithTheOwner(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	h.kill(owner)
	al := h.mustAcquire(h.key("s"), owner)
	h.waitStops(1, "owner_gone")
	h.waitGone(al.Worker.PID())
	assert.Equal(t, 0, h.snapshot().Owners)
}
