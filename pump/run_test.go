package pump

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/bell"
)

// runAsync starts a per-call run's server on the harness's config and
// hooks; the channel delivers its stats.
func (h *harness) runAsync(ctx context.Context, exited <-chan struct{}) <-chan Stats {
	out := make(chan Stats, 1)
	run := startRun(ctx, h.cfg, exited, h.hooks)
	go func() { out <- run.Wait() }()
	return out
}

// runToEnd is a run whose server is started with exited as given, and
// waited for.
func (h *harness) runToEnd(ctx context.Context, exited <-chan struct{}) Stats {
	return startRun(ctx, h.cfg, exited, h.hooks).Wait()
}

func (h *harness) withBells() *bell.Pair {
	h.t.Helper()
	b, err := bell.New()
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = b.Close() })
	h.cfg.Bells = b
	return b
}

// ringHost is what the shim does after publishing a frame.
func ringHost(t *testing.T, b *bell.Pair) {
	t.Helper()
	_, err := b.ChildFiles()[0].Write([]byte{1})
	require.NoError(t, err)
}

// floodWithRequest rings the request bell as fast as it can for 300 ms,
// publishes request 1 (and rings for it) in the middle, and returns how
// many rings the flood made.
func floodWithRequest(t *testing.T, h *harness, b *bell.Pair) int64 {
	t.Helper()
	stop := make(chan struct{})
	flooded := make(chan int64)
	go func() {
		var n int64
		w := b.ChildFiles()[0]
		one := []byte{1}
		for {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			if _, err := w.Write(one); err == nil {
				n++
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	h.request(1, "read", map[string]any{"text": "through the flood"})
	ringHost(t, b)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	return <-flooded
}

func TestRunSweepsOnAWakeUpAndRingsBack(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour // only a ring can make it sweep
	exited := make(chan struct{})
	got := h.collect()
	done := h.runAsync(context.Background(), exited)

	h.request(1, "read", map[string]any{"text": "hi"})
	ringHost(t, b)
	buf := make([]byte, 16)
	n, err := b.ChildFiles()[1].Read(buf) // the shim's wait for a ring
	require.NoError(t, err)
	require.Positive(t, n)
	assert.Equal(t, response{ID: 1, OK: true, Content: "hi"}, h.mustResponse(1))

	h.frame(KindNotify, 1, notifyFrame(t, 1, "last words"))
	close(exited)
	stats := <-done
	assert.Equal(t, 1, stats.Calls)
	assert.Equal(t, 1, stats.NotifyForwarded, "the final drain forwards a notification written before exit")
	assert.Equal(t, []string{"last words"}, *got)
}

func TestRunPollsWithoutBells(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)
	h.request(1, "read", nil)
	waitFor(t, "the answer", func() bool { _, ok := h.response(1); return ok })
	close(exited)
	assert.Equal(t, 1, (<-done).Calls)
}

func TestRunNeverDispatchesARequestPresentAfterExit(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	b := h.withBells()
	h.cfg.PollInterval = time.Millisecond
	got := h.collect()
	exited := make(chan struct{})
	close(exited)
	h.request(1, "read", nil)
	h.frame(KindNotify, 1, notifyFrame(t, 1, "posthumous notify"))
	ringHost(t, b)
	// Once closed, the bells' drain has read the ring, and nobody heard
	// it: the loop's subscription starts with it pending.
	require.NoError(t, b.Close())

	stats := h.runToEnd(context.Background(), exited)
	assert.Zero(t, read.runs.Load(), "a posthumous request never runs")
	assert.Zero(t, stats.Calls)
	_, answered := h.response(1)
	assert.False(t, answered)
	assert.True(t, h.exists(h.reqName(1)), "left for teardown")
	assert.Equal(t, []string{"posthumous notify"}, *got, "notifications still drain")
}

func TestRunStopsAtExitEvenWithRequestsArrivingLater(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Millisecond
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)
	close(exited)
	<-done
	h.request(1, "read", nil)
	assert.Zero(t, read.runs.Load())
}

func TestRunCancelsInFlightDispatchesWhenItsContextEnds(t *testing.T) {
	b := newBlocker("read")
	h := newHarness(t, b)
	h.cfg.PollInterval = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan struct{})
	done := h.runAsync(ctx, exited)
	h.request(1, "read", nil)
	b.waitStart(t)
	cancel()
	waitFor(t, "the tool to see the cancellation", func() bool { return b.canceled.Load() == 1 })
	select {
	case <-done:
		t.Fatal("the run ended before the script exited")
	default:
	}
	close(exited)
	stats := <-done
	assert.Equal(t, 1, stats.Calls)
	assert.Equal(t, 1, stats.Errors)
	_, answered := h.response(1)
	assert.False(t, answered)
}

func TestRunSurvivesABellFloodAndStillAnswers(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	b := h.withBells()
	h.cfg.PollInterval = 100 * time.Millisecond
	var sweeps, spurious atomic.Int64
	h.hooks.onSweep = func(work int) {
		sweeps.Add(1)
		if work == 0 {
			spurious.Add(1)
		}
	}
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)

	rings := floodWithRequest(t, h, b)
	waitFor(t, "the answer", func() bool { _, ok := h.response(1); return ok })
	close(exited)
	stats := <-done

	assert.Equal(t, response{ID: 1, OK: true, Content: "through the flood"}, h.mustResponse(1))
	assert.Equal(t, 1, stats.Calls)
	t.Logf("%d rings, %d sweeps (%d spurious)", rings, sweeps.Load(), spurious.Load())
	require.Greater(t, rings, int64(1000), "the flood really flooded")
	assert.Less(t, sweeps.Load(), int64(60), "backoff keeps a flood from driving sweeps")
}

func TestWakeGateBacksOffOnlyAfterRepeatedSpuriousWakeUps(t *testing.T) {
	g := wakeGate{max: 10 * time.Millisecond}
	var got []time.Duration
	for range 7 {
		got = append(got, g.after(true, 0))
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, ms, 2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms}, got)

	assert.Zero(t, g.after(false, 0), "a quiet fallback poll holds nothing back")
	assert.Equal(t, 10*ms, g.after(true, 0), "nor does it reset the streak")
	assert.Zero(t, g.after(true, 1), "a productive sweep resets")
	assert.Zero(t, g.after(true, 0), "the first spurious wake-up after work is forgiven")
	assert.Equal(t, ms, g.after(true, 0))
	assert.Zero(t, g.after(false, 3), "productive fallback polls reset too")
	assert.Zero(t, g.after(true, 0))
}

func TestARunSettlesTheSweepInFlightAtExitBeforeItEnds(t *testing.T) {
	slow := newBlocker("read")
	h := newHarness(t, slow)
	h.cfg.PollInterval = time.Millisecond
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)
	h.request(1, "read", nil)
	slow.waitStart(t)

	close(exited) // the script is gone; its claimed call is not
	select {
	case <-done:
		t.Fatal("the run ended with a sweep in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(slow.release)
	st := <-done
	assert.Equal(t, response{ID: 1, OK: true, Content: "done 1"}, h.mustResponse(1), "the call ran to its end")
	assert.Equal(t, 1, st.Calls)
	assert.Zero(t, st.Errors)
	assert.EqualValues(t, len("done 1"), st.Bytes)
	assert.False(t, st.AccountingLoss)
}

// A run's cancelled sweep keeps its own figures: the auth failure it
// refused stays a denial and the abandoned claim stays unanswered. A
// session's conservative settlement would lose the one and answer the
// other.
func TestARunKeepsTheFiguresOfTheSweepItsEndCancelled(t *testing.T) {
	slow := newBlocker("read")
	h := newHarness(t, slow)
	h.cfg.PollInterval = time.Millisecond
	h.requestWithToken(1, "not the token", "read", nil)
	h.request(2, "read", nil) // one sweep finds both
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan struct{})
	done := h.runAsync(ctx, exited)
	slow.waitStart(t)
	cancel()
	waitFor(t, "the tool to see the cancellation", func() bool { return slow.canceled.Load() == 1 })
	close(exited)

	st := <-done
	assert.Equal(t, 1, st.Denied, "the refused forgery")
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors, "the abandoned claim")
	assert.False(t, st.AccountingLoss)
	_, answered := h.response(2)
	assert.False(t, answered, "nobody waits for the answer of an ended run")
	assert.True(t, h.exists(markerName(2)), "left for teardown")
}

func TestARunWhoseSweepIgnoresItsCancellationStillEnds(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	h.hooks.killGrace = 10 * time.Millisecond
	policy := &gatePolicy{entered: make(chan struct{}), release: make(chan struct{})}
	h.cfg.Policy = policy
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan struct{})
	done := h.runAsync(ctx, exited)
	h.request(1, "read", nil)
	<-policy.entered

	cancel() // the sweep is stuck in the policy, deaf to it
	close(exited)
	var st Stats
	select {
	case st = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never ended")
	}
	assert.Equal(t, 1, st.Calls, "the reservation in the ledger is charged")
	assert.Equal(t, 1, st.Errors)
	assert.True(t, st.AccountingLoss)

	// The abandoned sweep comes back, refuses the call, and is done with
	// the directory once the request is gone.
	close(policy.release)
	waitFor(t, "the abandoned sweep to finish", func() bool { return !h.exists(h.reqName(1)) })
}

func TestAPanickingSweepOfARunIsContainedAndSettledConservatively(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	var fired atomic.Bool
	h.hooks.unlink = func(path string) error {
		if filepath.Base(path) == markerName(1) && fired.CompareAndSwap(false, true) {
			panic("sweep broke")
		}
		return syscall.Unlink(path)
	}
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)
	h.request(1, "read", map[string]any{"text": "one"})
	waitFor(t, "the sweep to fault", fired.Load)
	h.request(2, "read", map[string]any{"text": "two"})
	waitFor(t, "the next sweep's answer", h.answered(2))
	close(exited)

	st := <-done
	assert.Equal(t, "one", h.mustResponse(1).Content)
	assert.Equal(t, "two", h.mustResponse(2).Content)
	assert.Equal(t, 2, st.Calls)
	assert.EqualValues(t, 6, st.Bytes, "call 1's accounting is restored from its answer")
	assert.True(t, st.AccountingLoss)
}

// A run's server subscribes to the bells after its interpreter started:
// a request rung for in between is swept at once, not at the fallback
// poll.
func TestARunSweepsARequestRungBeforeItsServerStarted(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour // only a ring can make it sweep
	h.request(1, "read", map[string]any{"text": "early"})
	ringHost(t, b)
	time.Sleep(20 * time.Millisecond) // the bells' drain reads the ring, with nobody subscribed
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)
	waitFor(t, "the answer", h.answered(1))
	close(exited)
	assert.Equal(t, 1, (<-done).Calls)
	assert.Equal(t, "early", h.mustResponse(1).Content)
}

// A wake-up heard while a sweep is in flight is not acted on once the
// script has exited, even when the loop hears the sweep's end before the
// exit: the request it rang for belongs to nobody.
func TestARunIgnoresAWakeUpPendingWhenItsScriptExits(t *testing.T) {
	slow := newBlocker("read")
	ls := echoTool("ls")
	h := newHarness(t, slow, ls)
	b := h.withBells()
	h.cfg.PollInterval = time.Hour
	exited := make(chan struct{})
	var once sync.Once
	// The script exits as the loop settles the sweep, before the loop
	// could have heard of it.
	h.hooks.onSweep = func(int) { once.Do(func() { close(exited) }) }
	done := h.runAsync(context.Background(), exited)
	h.request(1, "read", nil)
	ringHost(t, b)
	slow.waitStart(t)

	probe, cancelProbe := b.Subscribe()
	defer cancelProbe()
	h.request(2, "ls", nil)
	ringHost(t, b)
	<-probe                           // the ring reached every subscriber
	time.Sleep(20 * time.Millisecond) // and the loop has heard it mid-sweep
	close(slow.release)

	st := <-done
	assert.Equal(t, 1, st.Calls)
	assert.Zero(t, ls.runs.Load(), "a request rung for before the exit, swept after it, never runs")
	assert.True(t, h.exists(h.reqName(2)), "left for teardown")
}
