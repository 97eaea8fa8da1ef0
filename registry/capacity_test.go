package registry

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

func TestThirdKeyEvictsTheLeastRecentlyUsedIdleKernel(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner, withMax(2))
	b := h.mustAcquire(h.key("b"), owner, withMax(2))
	require.NoError(t, h.release(a.Lease))
	require.NoError(t, h.release(b.Lease))
	// Using a again makes b the least recently used.
	h.clock.Advance(1)
	a2 := h.mustAcquire(h.key("a"), owner, withMax(2))
	require.True(t, a2.Reused)
	require.NoError(t, h.release(a2.Lease))

	c := h.mustAcquire(h.key("c"), owner, withMax(2))
	assert.Equal(t, uint64(3), c.Generation)
	h.waitStops(2, "evicted")
	h.waitGone(b.Worker.PID())
	assert.Empty(t, h.stopsOf(1))
	s := h.snapshot()
	assert.Equal(t, 2, s.Live)
	assert.Equal(t, 0, s.Available)

	h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 1 }, "stop event")
	stop := events[telemetry.SessionStop](h)[0]
	assert.Equal(t, telemetry.StopCapacityEviction, stop.Reason)
	assert.Equal(t, 2, stop.LiveKernels)
	assert.Equal(t, 2, stop.Capacity)
}

// Never evicted: a leased kernel (even idle), a starting one, a running
// or queued one; with nothing evictable the answer is capacity_exhausted.
func TestNothingEvictableMeansCapacityExhausted(t *testing.T) {
	busy := func(phase kernelworker.Phase, queued int) func(*fakeWorker) {
		return func(w *fakeWorker) {
			w.phase = phase
			if phase == kernelworker.PhaseRunning {
				w.active = dummyCell("c1")
			}
			for range queued {
				w.queue = append(w.queue, dummyCell("q"))
			}
		}
	}
	cases := map[string]struct {
		release bool // release the lease on the first kernel
		shape   func(*fakeWorker)
	}{
		"leased idle kernel":  {false, func(*fakeWorker) {}},
		"starting kernel":     {true, busy(kernelworker.PhaseStarting, 0)},
		"running kernel":      {true, busy(kernelworker.PhaseRunning, 0)},
		"kernel with a queue": {true, busy(kernelworker.PhaseRunning, 2)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			owner := h.newOwner()
			first := h.mustAcquire(h.key("a"), owner, withMax(1))
			if c.release {
				require.NoError(t, h.release(first.Lease))
			}
			h.do(1, c.shape)

			r := h.acquire(h.key("b"), owner, withMax(1))
			require.ErrorIs(t, r.Err, ErrCapacityExhausted)
			h.sync()
			assert.Empty(t, h.stopsOf(1), "nothing may be evicted")
			assert.True(t, h.alive(first.Worker.PID()))
			assert.Equal(t, 1, h.startCount())
			assert.Equal(t, 1, h.snapshot().Live)
		})
	}
}

func TestCapBelowTheLiveCountIsRefusedWithoutEviction(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	for _, s := range []string{"a", "b", "c"} {
		al := h.mustAcquire(h.key(s), owner, withMax(3))
		require.NoError(t, h.release(al.Lease))
	}
	r := h.acquire(h.key("d"), owner, withMax(2))
	require.ErrorIs(t, r.Err, ErrCapacityExhausted)
	h.sync()
	for gen := uint64(1); gen <= 3; gen++ {
		assert.Empty(t, h.stopsOf(gen))
	}
	assert.Equal(t, 3, h.snapshot().Live)
}

func TestAdmissionPassesOverBusyKernelsToTheNextIdleOne(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner, withMax(2))
	b := h.mustAcquire(h.key("b"), owner, withMax(2))
	require.NoError(t, h.release(a.Lease))
	require.NoError(t, h.release(b.Lease))
	// a is least recently used but starting: b is evicted instead.
	h.do(1, func(w *fakeWorker) { w.phase = kernelworker.PhaseStarting })

	h.mustAcquire(h.key("c"), owner, withMax(2))
	h.waitStops(2, "evicted")
	assert.Empty(t, h.stopsOf(1))
}

func TestAdmissionStopsAnUnreachableIdleKernelToMakeRoom(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner, withMax(1))
	require.NoError(t, h.release(a.Lease))
	h.do(1, func(w *fakeWorker) { w.status = "process_dead" })

	h.mustAcquire(h.key("b"), owner, withMax(1))
	h.waitStops(1, "shutdown")
	h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 1 }, "stop event")
	assert.Equal(t, telemetry.StopShutdown, events[telemetry.SessionStop](h)[0].Reason)
}

// dummyCell is a cell the test planted in a fake worker.
func dummyCell(id string) *fakeCell {
	return &fakeCell{id: id, stop: func() bool { return true },
		ex: &kernelworker.Execute{Reply: make(chan kernelworker.CellResult, 1)}}
}
