package registry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

func TestConcurrentFirstAcquiresStartExactlyOneWorker(t *testing.T) {
	h := newHarness(t)
	k := h.key("s1")
	const callers = 8
	allocs := make([]Allocation, callers)
	var wg sync.WaitGroup
	for i := range callers {
		owner := h.newOwner()
		wg.Go(func() { allocs[i] = h.mustAcquire(k, owner) })
	}
	wg.Wait()

	assert.Equal(t, 1, h.startCount())
	fresh := 0
	for _, a := range allocs {
		assert.Equal(t, allocs[0].Worker.PID(), a.Worker.PID())
		assert.Equal(t, uint64(1), a.Generation)
		if !a.Reused {
			fresh++
		}
	}
	assert.Equal(t, 1, fresh, "exactly one caller started the kernel")
	s := h.snapshot()
	assert.Equal(t, callers, s.Owners)
	assert.Equal(t, callers, s.InflightCells)
	assert.Equal(t, 1, s.Live)
	require.NotNil(t, allocs[0].Lease.Context())
}

func TestGenerationsCountOnlySuccessfulStarts(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner)
	b := h.mustAcquire(h.key("b"), owner)
	h.failNextStart()
	failed := h.acquire(h.key("c"), owner)
	c := h.mustAcquire(h.key("c"), owner)

	assert.Equal(t, uint64(1), a.Generation)
	assert.Equal(t, uint64(2), b.Generation)
	require.ErrorIs(t, failed.Err, ErrStartupFailed)
	assert.Equal(t, uint64(3), c.Generation, "a failed start consumes no generation")

	crashes := events[telemetry.SessionCrash](h)
	require.Len(t, crashes, 1)
	assert.Equal(t, telemetry.CrashStartupFailure, crashes[0].Reason)
	assert.Equal(t, time.Duration(0), crashes[0].Duration)
	assert.Equal(t, 2, crashes[0].LiveKernels)
	starts := events[telemetry.SessionStart](h)
	require.Len(t, starts, 3)
	assert.Equal(t, []int{1, 2, 3}, []int{starts[0].LiveKernels, starts[1].LiveKernels, starts[2].LiveKernels})
}

func TestAcquireRejectsIncompleteRequestsWithoutChangingState(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	k := h.key("s")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cases := map[string]struct {
		msg  *acquireMsg
		want error
	}{
		"no owner":       {&acquireMsg{Key: k, Caller: context.Background()}, ErrInvalidRequest},
		"no caller":      {&acquireMsg{Key: k, Owner: owner}, ErrInvalidRequest},
		"zero key":       {&acquireMsg{Owner: owner, Caller: context.Background()}, ErrInvalidRequest},
		"relative cwd":   {&acquireMsg{Key: Key{ScopeID: "s", AgentID: "a", Cwd: "w", Interpreter: "/p", ProtocolVersion: 1}, Owner: owner, Caller: context.Background()}, ErrInvalidRequest},
		"negative max":   {&acquireMsg{Key: k, Owner: owner, Caller: context.Background(), MaxLiveKernels: -1}, ErrInvalidRequest},
		"caller is gone": {&acquireMsg{Key: k, Owner: owner, Caller: gone}, context.Canceled},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := ask[*acquireReply](h, c.msg)
			require.ErrorIs(t, r.Err, c.want)
		})
	}
	assert.Equal(t, 0, h.startCount())
	s := h.snapshot()
	assert.Equal(t, 0, s.Live)
	assert.Equal(t, 0, s.InflightCells)
	assert.Equal(t, 0, s.Owners)
}

func TestAcquireAcceptsValueMessages(t *testing.T) {
	h := newHarness(t)
	r := ask[*acquireReply](h, acquireMsg{Key: h.key("s"), Owner: h.newOwner(), Caller: context.Background()})
	require.NoError(t, r.Err)
	assert.NoError(t, ask[*releaseReply](h, releaseMsg{Lease: r.Allocation.Lease}).Err)
}

// Any invalid status makes the next acquire replace the worker with a higher
// generation.
func TestInvalidWorkerStatusMakesAcquireReplaceTheWorker(t *testing.T) {
	modes := []string{"garbage", "wrong_gen", "wrong_key", "process_dead", "idle_active",
		"running_no_id", "unknown_phase", "negative_queue", "silent"}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.StatusTimeout = 50 * time.Millisecond })
			owner := h.newOwner()
			k := h.key("s")
			first := h.mustAcquire(k, owner)
			require.NoError(t, h.release(first.Lease))
			h.do(1, func(w *fakeWorker) { w.status = mode })

			second := h.mustAcquire(k, owner)
			assert.Equal(t, uint64(2), second.Generation)
			assert.False(t, second.Reused)
			assert.NotEqual(t, first.Worker.PID(), second.Worker.PID())
			h.waitGone(first.Worker.PID())
			assert.Equal(t, 1, h.snapshot().Live)
		})
	}
}

func TestNonAttachablePhasesAreReplacedAndAttachableOnesReused(t *testing.T) {
	cases := map[string]struct {
		phase  kernelworker.Phase
		active string
		reused bool
	}{
		"starting":   {kernelworker.PhaseStarting, "", true},
		"idle":       {kernelworker.PhaseIdle, "", true},
		"running":    {kernelworker.PhaseRunning, "c1", true},
		"cancelling": {kernelworker.PhaseCancelling, "c1", false},
		"stopping":   {kernelworker.PhaseStopping, "", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			owner := h.newOwner()
			k := h.key("s")
			first := h.mustAcquire(k, owner)
			h.do(1, func(w *fakeWorker) {
				w.phase = c.phase
				if c.active != "" {
					w.active = dummyCell(c.active)
				}
			})
			second := h.mustAcquire(k, owner)
			assert.Equal(t, c.reused, second.Reused)
			if c.reused {
				assert.Equal(t, first.Worker.PID(), second.Worker.PID())
				assert.Empty(t, h.stopsOf(1))
				return
			}
			assert.Equal(t, uint64(2), second.Generation)
			h.waitStops(1, "shutdown")
		})
	}
}
