package registry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReleaseIsIdempotent(t *testing.T) {
	h := newHarness(t)
	a := h.mustAcquire(h.key("s"), h.newOwner())
	require.NoError(t, h.release(a.Lease))
	assert.NoError(t, h.release(a.Lease))
	assert.Equal(t, 0, h.snapshot().InflightCells)
	assert.ErrorIs(t, context.Cause(a.Lease.Context()), errLeaseEnded)
}

func TestReleaseOfALeaseNeverIssuedIsInvalid(t *testing.T) {
	h := newHarness(t)
	a := h.mustAcquire(h.key("s"), h.newOwner())
	forgedGen := a.Lease
	forgedGen.generation++
	forgedWorker := a.Lease
	forgedWorker.worker = h.newOwner()
	cases := map[string]Lease{
		"zero lease":       {},
		"unissued id":      {id: a.Lease.id + 100, generation: 1, worker: a.Worker.PID()},
		"wrong generation": forgedGen,
		"wrong worker":     forgedWorker,
	}
	for name, l := range cases {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, h.release(l), ErrInvalidLease)
		})
	}
	assert.Equal(t, 1, h.snapshot().InflightCells, "a forged release frees nothing")
	assert.NoError(t, h.release(a.Lease))
}

// A lease of a replaced kernel cannot free its replacement's slot.
func TestStaleLeaseNeverFreesTheReplacementsCapacity(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	k := h.key("s")
	old := h.mustAcquire(k, owner, withMax(1))
	rr := h.reset(k, owner) // sole owner: generation 1 stops
	require.NoError(t, rr.Err)
	require.True(t, rr.Performed)
	repl := h.mustAcquire(k, owner, withMax(1))
	require.Equal(t, uint64(2), repl.Generation)

	assert.NoError(t, h.release(old.Lease), "a stale release succeeds")
	s := h.snapshot()
	assert.Equal(t, 1, s.InflightCells, "the replacement's lease is untouched")
	r := h.acquire(h.key("other"), owner, withMax(1))
	assert.ErrorIs(t, r.Err, ErrCapacityExhausted, "the replacement is still leased, so not evictable")
	assert.NoError(t, context.Cause(repl.Lease.Context()))
}

// A caller whose context ends loses its lease; its owner stays attached.
func TestCallerDeathReleasesTheLeaseAndKeepsTheOwner(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	caller, cancel := context.WithCancel(context.Background())
	a := h.mustAcquire(h.key("s"), owner, withCaller(caller))
	require.Equal(t, 1, h.snapshot().InflightCells)

	cancel()
	h.eventually(func() bool { return h.snapshot().InflightCells == 0 }, "lease released")
	s := h.snapshot()
	assert.Equal(t, 1, s.Owners)
	assert.Equal(t, 1, s.Live)
	assert.Equal(t, 1, s.Phases["idle"])
	assert.True(t, h.alive(a.Worker.PID()))
	assert.Empty(t, h.stopsOf(1))
	assert.ErrorIs(t, a.Lease.Context().Err(), context.Canceled)
	assert.NoError(t, h.release(a.Lease), "the caller's own late release is harmless")
}

func TestZeroLeaseContextIsDone(t *testing.T) {
	assert.Error(t, Lease{}.Context().Err())
}
