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

// stuckStart is how long a held start waits at most; the tests release
// it long before.
const stuckStart = 5 * time.Second

// queryBound is how fast the registry must answer a query while a start
// or a status query is stuck: within 10 ms. A scheduler's hiccup on a
// loaded machine can exceed that once, a blocked mailbox every time, so
// the bound holds for the best of queryTries snapshots.
const (
	queryBound = 10 * time.Millisecond
	queryTries = 5
)

// notHeld bounds a request that changes state and so cannot be repeated:
// answered long before the stuck start or query gives up, it did not
// wait for it.
const notHeld = stuckStart / 5

// bestOf returns the fastest of queryTries runs of ask.
func bestOf(ask func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range queryTries {
		best = min(best, timed(ask))
	}
	return best
}

// holdStarts makes every start of a key of scope wait until release is
// called, the registry stops or stuckStart passes. entered receives the
// generation of each start as it begins waiting.
func (h *harness) holdStarts(scope string) (entered <-chan uint64, release func()) {
	in := make(chan uint64, 8)
	gate := make(chan struct{})
	h.mu.Lock()
	h.gate = func(ctx context.Context, key Key, gen uint64) {
		if key.ScopeID != scope {
			return
		}
		in <- gen
		t := time.NewTimer(stuckStart)
		defer t.Stop()
		select {
		case <-gate:
		case <-ctx.Done():
		case <-t.C:
		}
	}
	h.mu.Unlock()
	released := false
	release = func() {
		if !released {
			released = true
			close(gate)
		}
	}
	h.t.Cleanup(release)
	return in, release
}

// answer is a request sent without waiting. A protoactor future wakes
// only one of its waiters, so one goroutine waits on it, once.
type answer chan futureResult

type futureResult struct {
	res any
	err error
}

// send asks the registry without waiting for the answer.
func (h *harness) send(msg any) answer {
	f := h.sys.Root.RequestFuture(h.reg, msg, askTimeout)
	ch := make(answer, 1)
	go func() {
		res, err := f.Result()
		ch <- futureResult{res, err}
	}()
	return ch
}

func result[T any](h *harness, a answer) T {
	h.t.Helper()
	r := <-a
	require.NoError(h.t, r.err)
	v, ok := r.res.(T)
	require.True(h.t, ok, "answer %T", r.res)
	return v
}

// timed runs ask and returns how long it took.
func timed(ask func()) time.Duration {
	t0 := time.Now()
	ask()
	return time.Since(t0)
}

func waitEntered(t *testing.T, entered <-chan uint64) uint64 {
	t.Helper()
	select {
	case gen := <-entered:
		return gen
	case <-time.After(askTimeout):
		require.FailNow(t, "the start never began")
		return 0
	}
}

// pendingAnswer asserts that f has no answer yet: the registry holds it.
func pendingAnswer(t *testing.T, h *harness, a answer, what string) {
	t.Helper()
	h.detach(nil) // answered at once: everything sent before is handled
	select {
	case r := <-a:
		a <- r
		assert.Fail(t, what+" answered early")
	case <-time.After(20 * time.Millisecond):
	}
}

func TestRegistryAnswersWhileAKernelStartIsStuck(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("slow")
	owner := h.newOwner()
	slow := h.send(&acquireMsg{Key: h.key("slow"), Owner: owner, Caller: context.Background()})
	waitEntered(t, entered)

	var s *Snapshot
	took := bestOf(func() { s = h.snapshot() })
	t.Logf("snapshot while a start is stuck: %v", took)
	assert.Less(t, took, queryBound, "snapshot while a start is stuck")
	assert.Equal(t, 1, s.Live, "the start in flight holds a slot")
	assert.Equal(t, 1, s.Phases["starting"])
	assert.Equal(t, s.Max-1, s.Available)

	var other Allocation
	took = timed(func() { other = h.mustAcquire(h.key("fast"), h.newOwner()) })
	t.Logf("acquire of another key while a start is stuck: %v", took)
	assert.Less(t, took, notHeld, "acquire of another key while a start is stuck")
	took = timed(func() { require.NoError(t, h.release(other.Lease)) })
	assert.Less(t, took, notHeld, "release while a start is stuck")
	took = timed(func() { again := h.mustAcquire(h.key("fast"), h.newOwner()); assert.True(t, again.Reused) })
	assert.Less(t, took, notHeld, "reuse while a start is stuck")

	release()
	got := result[*acquireReply](h, slow)
	require.NoError(t, got.Err)
	assert.False(t, got.Allocation.Reused)
	assert.Equal(t, 2, h.snapshot().Live)
}

// A worker that does not answer its status holds only the acquire that
// asked it (up to StatusTimeout), never the registry.
func TestRegistryAnswersWhileAStatusQueryIsStuck(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	a := h.mustAcquire(h.key("a"), owner)
	require.NoError(t, h.release(a.Lease))
	h.do(1, func(w *fakeWorker) { w.status = "silent" })
	stuck := h.send(&acquireMsg{Key: h.key("a"), Owner: owner, Caller: context.Background()})

	took := timed(func() { h.mustAcquire(h.key("b"), owner) })
	assert.Less(t, took, notHeld, "acquire of another key while a status query is stuck")
	took = timed(func() { h.detach(h.newOwner()) })
	assert.Less(t, took, notHeld, "detach while a status query is stuck")
	pendingAnswer(t, h, stuck, "the acquire of the silent kernel")

	// The silent worker dies: its query resolves at once, unreachable,
	// and the acquire gets a fresh kernel.
	h.sys.Root.Send(a.Worker.PID(), fakeDie{})
	got := result[*acquireReply](h, stuck)
	require.NoError(t, got.Err)
	assert.Equal(t, uint64(3), got.Allocation.Generation)
}

func TestAcquiresOfAStartingKeyJoinItsStart(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	k := h.key("s")
	first := h.send(&acquireMsg{Key: k, Owner: h.newOwner(), Caller: context.Background()})
	waitEntered(t, entered)
	second := h.send(&acquireMsg{Key: k, Owner: h.newOwner(), Caller: context.Background()})
	pendingAnswer(t, h, second, "the second acquire")

	release()
	a, b := result[*acquireReply](h, first), result[*acquireReply](h, second)
	require.NoError(t, a.Err)
	require.NoError(t, b.Err)
	assert.Equal(t, a.Allocation.Worker.PID(), b.Allocation.Worker.PID())
	assert.Equal(t, 1, h.startCount())
	s := h.snapshot()
	assert.Equal(t, 2, s.Owners)
	assert.Equal(t, 2, s.InflightCells)
}

func TestAStartInFlightCountsAgainstTheCap(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("slow")
	owner := h.newOwner()
	slow := h.send(&acquireMsg{Key: h.key("slow"), Owner: owner, Caller: context.Background(), MaxLiveKernels: 1})
	waitEntered(t, entered)

	over := h.acquire(h.key("other"), owner, withMax(1))
	require.ErrorIs(t, over.Err, ErrCapacityExhausted)

	release()
	require.NoError(t, result[*acquireReply](h, slow).Err)
	assert.Equal(t, 1, h.startCount())
}

func TestStopAllDuringAStartStopsTheNewKernel(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	owner := h.newOwner()
	acq := h.send(&acquireMsg{Key: h.key("s"), Owner: owner, Caller: context.Background()})
	gen := waitEntered(t, entered)
	stopAll := h.send(&stopAllMsg{})
	pendingAnswer(t, h, stopAll, "StopAll")

	release()
	require.ErrorIs(t, result[*acquireReply](h, acq).Err, ErrShutdown)
	require.NoError(t, result[*stopAllReply](h, stopAll).Err)
	assert.Equal(t, []string{"shutdown"}, h.stopsOf(gen))
	assert.False(t, h.alive(h.worker(gen)), "StopAll answers once the new kernel is gone")
	s := h.snapshot()
	assert.Equal(t, 0, s.Live)
	assert.Equal(t, 0, s.Owners)
	stops := events[telemetry.SessionStop](h)
	require.Len(t, stops, 1)
	assert.Equal(t, telemetry.StopShutdown, stops[0].Reason)
}

// An owner that leaves while its acquire waits for a start is handled as
// if it had left right after: the acquire gets its kernel with a lease
// already ended, and the kernel, owned by nobody, stops.
func TestOwnerLeavingDuringAStartEndsTheKernel(t *testing.T) {
	for name, leave := range map[string]func(h *harness, owner *actor.PID){
		"detach": func(h *harness, owner *actor.PID) { h.detach(owner) },
		"dies":   func(h *harness, owner *actor.PID) { h.kill(owner); h.sync() },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			entered, release := h.holdStarts("s")
			owner := h.newOwner()
			acq := h.send(&acquireMsg{Key: h.key("s"), Owner: owner, Caller: context.Background()})
			gen := waitEntered(t, entered)
			leave(h, owner)

			release()
			got := result[*acquireReply](h, acq)
			require.NoError(t, got.Err)
			require.ErrorIs(t, context.Cause(got.Allocation.Lease.Context()), ErrOwnerGone)
			assert.NoError(t, h.release(got.Allocation.Lease))
			h.waitStops(gen, "owner_gone")
			h.waitGone(h.worker(gen))
			s := h.snapshot()
			assert.Equal(t, 0, s.Live)
			assert.Equal(t, 0, s.Owners)
			assert.Equal(t, 0, s.InflightCells)
		})
	}
}

// A co-owner that leaves during the start does not take the kernel from
// the owner that stays.
func TestCoOwnerLeavingDuringAStartLeavesTheKernelToTheOther(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	k := h.key("s")
	stays, leaves := h.newOwner(), h.newOwner()
	a := h.send(&acquireMsg{Key: k, Owner: stays, Caller: context.Background()})
	gen := waitEntered(t, entered)
	b := h.send(&acquireMsg{Key: k, Owner: leaves, Caller: context.Background()})
	h.sync()
	h.detach(leaves)

	release()
	ra, rb := result[*acquireReply](h, a), result[*acquireReply](h, b)
	require.NoError(t, ra.Err)
	require.NoError(t, rb.Err)
	assert.NoError(t, ra.Allocation.Lease.Context().Err())
	assert.ErrorIs(t, context.Cause(rb.Allocation.Lease.Context()), ErrOwnerGone)
	s := h.snapshot()
	assert.Equal(t, 1, s.Live)
	assert.Equal(t, 1, s.Owners)
	assert.Equal(t, 1, s.InflightCells)
	assert.Empty(t, h.stopsOf(gen))
}

// A reset of a key whose start is in flight is handled once the start is
// over, as if it had arrived after: the new kernel is the one reset.
func TestResetDuringAStartWaitsForIt(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	owner := h.newOwner()
	k := h.key("s")
	acq := h.send(&acquireMsg{Key: k, Owner: owner, Caller: context.Background()})
	gen := waitEntered(t, entered)
	reset := h.send(&resetMsg{Key: k, Owner: owner})
	pendingAnswer(t, h, reset, "the reset")

	release()
	require.NoError(t, result[*acquireReply](h, acq).Err)
	rr := result[*resetReply](h, reset)
	require.NoError(t, rr.Err)
	assert.True(t, rr.Performed)
	assert.Equal(t, []string{"reset"}, h.stopsOf(gen))
	assert.False(t, h.alive(h.worker(gen)), "the reset answers once the kernel is gone")
}

func TestAFailedStartFailsEveryAcquireWaitingForIt(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	h.failNextStart()
	k := h.key("s")
	a := h.send(&acquireMsg{Key: k, Owner: h.newOwner(), Caller: context.Background()})
	waitEntered(t, entered)
	b := h.send(&acquireMsg{Key: k, Owner: h.newOwner(), Caller: context.Background()})
	h.sync()

	release()
	require.ErrorIs(t, result[*acquireReply](h, a).Err, ErrStartupFailed)
	require.ErrorIs(t, result[*acquireReply](h, b).Err, ErrStartupFailed)
	s := h.snapshot()
	assert.Equal(t, 0, s.Live)
	assert.Equal(t, 0, s.Owners)
	assert.Equal(t, uint64(1), h.mustAcquire(k, h.newOwner()).Generation, "the failed start gave its generation back")
}

// A registry that stops while a start is in flight leaves no worker
// behind: the worker that comes up afterwards is stopped.
func TestRegistryStoppingDuringAStartStopsTheNewWorker(t *testing.T) {
	h := newHarness(t)
	entered, release := h.holdStarts("s")
	acq := h.send(&acquireMsg{Key: h.key("s"), Owner: h.newOwner(), Caller: context.Background()})
	gen := waitEntered(t, entered)
	require.NoError(t, h.sys.Root.StopFuture(h.reg).Wait())
	got := result[*acquireReply](h, acq)
	require.ErrorIs(t, got.Err, ErrUnavailable)

	release()
	h.eventually(func() bool { return len(h.stopsOf(gen)) == 1 }, "the orphan worker is told to stop")
	assert.Equal(t, []string{"shutdown"}, h.stopsOf(gen))
	h.waitGone(h.worker(gen))
}

// A Starter that panics fails its start; the registry and the host go on.
func TestAPanickingStarterFailsOnlyItsStart(t *testing.T) {
	h := newHarness(t)
	h.mu.Lock()
	h.gate = func(_ context.Context, key Key, _ uint64) {
		if key.ScopeID == "boom" {
			panic("starter bug")
		}
	}
	h.mu.Unlock()
	owner := h.newOwner()
	failed := h.acquire(h.key("boom"), owner)
	require.ErrorIs(t, failed.Err, ErrStartupFailed)
	assert.ErrorContains(t, failed.Err, "starter panicked")
	ok := h.mustAcquire(h.key("fine"), owner)
	assert.Equal(t, uint64(1), ok.Generation)
}
