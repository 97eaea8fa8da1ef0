package registry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (h *harness) client() *Client { return NewClient(h.sys.Root, h.reg) }

func TestClientRunsAnOwnersLifeWithoutItsMessages(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	ctx := context.Background()
	o, err := c.Attach(ctx)
	require.NoError(t, err)
	k := h.key("s")

	a, err := c.Acquire(ctx, AcquireRequest{Key: k, Owner: o, Caller: ctx})
	require.NoError(t, err)
	assert.False(t, a.Reused)
	assert.Equal(t, uint64(1), a.Generation)
	s, err := c.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, s.Live)
	assert.Equal(t, 1, s.InflightCells)
	require.NoError(t, c.Release(ctx, a.Lease))

	rr, err := c.Reset(ctx, k, o)
	require.NoError(t, err)
	assert.Equal(t, ResetResult{Performed: true}, rr)
	assert.False(t, h.alive(a.Worker.PID()), "the reset answers once the worker is gone")

	b, err := c.Acquire(ctx, AcquireRequest{Key: k, Owner: o, Caller: ctx})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), b.Generation)
	require.NoError(t, c.Detach(ctx, o))
	assert.False(t, h.alive(o.pid), "Detach ends the owner's actor")
	h.waitGone(b.Worker.PID())
	require.NoError(t, c.StopAll(ctx))
	s, err = c.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, s.Live)
	assert.Equal(t, 0, s.Owners)
}

func TestClientRefusesRequestsWithoutAnOwner(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	ctx := context.Background()
	_, err := c.Acquire(ctx, AcquireRequest{Key: h.key("s"), Caller: ctx})
	require.ErrorIs(t, err, ErrInvalidRequest)
	_, err = c.Reset(ctx, h.key("s"), nil)
	require.ErrorIs(t, err, ErrInvalidRequest)
	require.NoError(t, c.Detach(ctx, nil))
}

// A caller that stops waiting gets its answer at once; the registry is
// none the worse, and the kernel it was starting is kept for its owner.
func TestClientStopsWaitingWhenItsContextEnds(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	c := h.client()
	o, err := c.Attach(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	caller, endCaller := context.WithCancel(context.Background())
	_, err = c.Acquire(ctx, AcquireRequest{Key: h.key("s"), Owner: o, Caller: caller})
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	waitEntered(t, entered)
	endCaller()

	release()
	h.eventually(func() bool { s := h.snapshot(); return s.Live == 1 && s.Phases["idle"] == 1 && s.InflightCells == 0 },
		"the kernel is up, owned, without a lease")
	assert.Equal(t, 1, h.snapshot().Owners)
	require.NoError(t, c.Detach(context.Background(), o))
}

func TestClientOfAStoppedRegistryIsUnavailable(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	require.NoError(t, h.sys.Root.StopFuture(h.reg).Wait())
	_, err := c.Snapshot(context.Background())
	require.ErrorIs(t, err, ErrUnavailable)
	o, err := c.Attach(context.Background())
	require.NoError(t, err)
	_, err = c.Acquire(context.Background(), AcquireRequest{Key: h.key("s"), Owner: o, Caller: context.Background()})
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, c.Detach(context.Background(), o), ErrUnavailable)
	assert.False(t, h.alive(o.pid))
}
