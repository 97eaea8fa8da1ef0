package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

// A sole owner's reset stops the kernel; the answer comes once the old
// worker is gone (or as stop_failed).
func TestSoleOwnerResetStopsTheKernelAndAnswersWhenItIsGone(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	k := h.key("s")
	first := h.mustAcquire(k, owner)
	require.NoError(t, h.release(first.Lease))

	rr := h.reset(k, owner)
	require.NoError(t, rr.Err)
	assert.True(t, rr.Performed)
	assert.False(t, rr.Forked)
	assert.False(t, h.alive(first.Worker.PID()), "reset answered only after the worker stopped")
	assert.Equal(t, []string{"reset"}, h.stopsOf(1))
	stops := events[telemetry.SessionStop](h)
	require.Len(t, stops, 1)
	assert.Equal(t, telemetry.StopReset, stops[0].Reason)

	next := h.mustAcquire(k, owner)
	assert.Equal(t, uint64(2), next.Generation)
	assert.False(t, next.Reused)
}

func TestResetWithoutAKernelPerformsNothing(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	rr := h.reset(h.key("s"), owner)
	require.NoError(t, rr.Err)
	assert.False(t, rr.Performed)
	assert.False(t, rr.Forked)
	assert.Equal(t, 0, h.startCount())
}

func TestResetRejectsIncompleteRequests(t *testing.T) {
	h := newHarness(t)
	assert.ErrorIs(t, h.reset(h.key("s"), nil).Err, ErrInvalidRequest)
	assert.ErrorIs(t, h.reset(Key{}, h.newOwner()).Err, ErrInvalidRequest)
}

// A co-owner's reset moves only the requester to a fork of its own.
func TestCoOwnerResetForksOnlyTheRequester(t *testing.T) {
	h := newHarness(t)
	a, b := h.newOwner(), h.newOwner()
	k := h.key("s")
	la := h.mustAcquire(k, a)
	lb := h.mustAcquire(k, b)
	require.NoError(t, h.release(la.Lease))
	require.NoError(t, h.release(lb.Lease))

	rr := h.reset(k, a)
	require.NoError(t, rr.Err)
	assert.True(t, rr.Performed)
	assert.True(t, rr.Forked)
	assert.Empty(t, h.stopsOf(1), "the shared kernel survives for b")

	fork := h.mustAcquire(k, a)
	assert.Equal(t, uint64(2), fork.Generation)
	assert.False(t, fork.Reused)
	require.NoError(t, h.release(fork.Lease))
	again := h.mustAcquire(k, a)
	assert.Equal(t, fork.Worker.PID(), again.Worker.PID(), "the fork is sticky")
	require.NoError(t, h.release(again.Lease))
	shared := h.mustAcquire(k, b)
	assert.Equal(t, la.Worker.PID(), shared.Worker.PID())
	require.NoError(t, h.release(shared.Lease))

	s := h.snapshot()
	assert.Equal(t, 2, s.Live)
	assert.Equal(t, 2, s.Owners)
	assert.Equal(t, 1, s.ForkedOwners)

	// A reset of the fork stops the fork, which stays installed.
	rr = h.reset(k, a)
	require.NoError(t, rr.Err)
	assert.True(t, rr.Performed)
	assert.True(t, rr.Forked)
	assert.False(t, h.alive(fork.Worker.PID()))
	fork2 := h.mustAcquire(k, a)
	assert.Equal(t, uint64(3), fork2.Generation)
	require.NoError(t, h.release(fork2.Lease))

	// Detaching a clears its forks; it rejoins the shared kernel.
	h.detach(a)
	h.waitStops(3, "owner_gone")
	rejoined := h.mustAcquire(k, a)
	assert.Equal(t, la.Worker.PID(), rejoined.Worker.PID())
	assert.True(t, rejoined.Reused)
	assert.Equal(t, 0, h.snapshot().ForkedOwners)
}

// Owner departure's rule (docs/architecture.md) for a reset: a co-owner's
// reset while its own cell is active discards the shared kernel; a merely
// queued cell of the requester leaves the queue and the sibling keeps the
// kernel.
func TestCoOwnerResetDiscardsTheSharedKernelOnlyIfItsCellIsActive(t *testing.T) {
	t.Run("active", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.newOwner(), h.newOwner()
		k := h.key("s")
		la := h.mustAcquire(k, a)
		lb := h.mustAcquire(k, b)
		replyA := h.execute(la)
		replyB := h.execute(lb)
		h.do(1, func(*fakeWorker) {})

		rr := h.reset(k, a)
		require.NoError(t, rr.Err)
		assert.True(t, rr.Forked)
		assert.Equal(t, "kernel_discarded", h.recv(replyB).Reason)
		assert.Equal(t, "interrupted", h.recv(replyA).Reason)
		h.waitGone(la.Worker.PID())
		next := h.mustAcquire(k, b)
		assert.Equal(t, uint64(2), next.Generation, "b gets a fresh kernel, never a's fork")
	})
	t.Run("queued", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.newOwner(), h.newOwner()
		k := h.key("s")
		lb := h.mustAcquire(k, b)
		la := h.mustAcquire(k, a)
		replyB := h.execute(lb)
		replyA := h.execute(la)
		h.do(1, func(*fakeWorker) {})

		rr := h.reset(k, a)
		require.NoError(t, rr.Err)
		assert.True(t, rr.Forked)
		assert.Equal(t, "interrupted", h.recv(replyA).Reason)
		h.finish(1)
		assert.Empty(t, h.recv(replyB).Reason)
		assert.Empty(t, h.stopsOf(1))
		assert.True(t, h.alive(lb.Worker.PID()))
	})
}

func TestResetReportsStopFailedWhenTheWorkerWillNotStop(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StopTimeout = 20 * time.Millisecond })
	h.onStart = func(_ uint64, w *fakeWorker) { w.ignoreStop = true }
	owner := h.newOwner()
	k := h.key("s")
	first := h.mustAcquire(k, owner)

	rr := h.reset(k, owner)
	assert.ErrorIs(t, rr.Err, ErrStopFailed)
	assert.True(t, rr.Performed)
	fb := events[telemetry.Fallback](h)
	require.Len(t, fb, 1)
	assert.Equal(t, telemetry.FallbackStopFailed, fb[0].Reason)
	// The forced stop of its actor still ends it.
	h.waitGone(first.Worker.PID())
	h.eventually(func() bool { return h.snapshot().Phases["unreachable"] == 0 }, "quarantine cleared")
	assert.Len(t, events[telemetry.SessionStop](h), 1)
}
