package pump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/executecode/executecode/tools"
)

// start runs a session server on the harness's config; the test's
// cleanup stops it.
func (h *harness) start() *Server {
	h.t.Helper()
	srv, err := startServer(h.cfg, h.hooks)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { srv.Stop(context.Background()) })
	return srv
}

// finalStats is the teardown read, with a hang guard.
func finalStats(t *testing.T, srv *Server) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := srv.DrainAndStats(ctx)
	require.NoError(t, err)
	return st
}

func abort(srv *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Abort(ctx)
}

func (h *harness) answered(id int64) func() bool {
	return func() bool { _, ok := h.response(id); return ok }
}

// syncBuffer is a log sink several goroutines may write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (h *harness) captureLog() *syncBuffer {
	var sink syncBuffer
	l := zerolog.New(&sink)
	h.cfg.Logger = &l
	return &sink
}

func TestStartServerRefusesAnInvalidConfigNamingTheKey(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		key    string
	}{
		{"empty dir", func(c *Config) { c.Dir = "" }, "Dir"},
		{"empty token", func(c *Config) { c.Token = "" }, "Token"},
		{"nil tools", func(c *Config) { c.Tools = nil }, "Tools"},
		{"zero max calls", func(c *Config) { c.MaxCalls = 0 }, "MaxCalls"},
		{"negative max calls", func(c *Config) { c.MaxCalls = -1 }, "MaxCalls"},
		{"zero max result bytes", func(c *Config) { c.MaxResultBytes = 0 }, "MaxResultBytes"},
		{"negative per-sweep cap", func(c *Config) { c.MaxRequestsPerSweep = -1 }, "MaxRequestsPerSweep"},
		{"negative parallelism", func(c *Config) { c.MaxParallel = -2 }, "MaxParallel"},
		{"negative poll interval", func(c *Config) { c.PollInterval = -time.Millisecond }, "PollInterval"},
		{"negative approval timeout", func(c *Config) { c.ApprovalContext.Timeout = -time.Second }, "ApprovalContext.Timeout"},
		{"token checked before max calls", func(c *Config) { c.Token, c.MaxCalls = "", 0 }, "Token"},
		{"dir checked before everything", func(c *Config) { c.Dir, c.Tools, c.MaxResultBytes = "", nil, 0 }, "Dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.mutate(&h.cfg)
			srv, err := StartServer(h.cfg)
			require.Error(t, err)
			assert.Nil(t, srv)
			assert.ErrorIs(t, err, errInvalidConfig)
			var ce *configError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
			assert.Contains(t, err.Error(), tc.key)
		})
	}
}

func TestStartServerAcceptsZeroOptionalsAsDefaults(t *testing.T) {
	h := newHarness(t)
	h.cfg.Tools = map[string]tools.Tool{}
	srv := h.start()
	assert.Equal(t, defaultMaxParallel, srv.cfg.MaxParallel)
	assert.Equal(t, defaultMaxPerSweep, srv.cfg.MaxRequestsPerSweep)
	assert.Equal(t, defaultPollNoBells, srv.cfg.PollInterval)
}

func TestServerAnswersOnAWakeUpAndRingsBack(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour // only a ring can make it sweep
	srv := h.start()

	h.request(1, "read", map[string]any{"text": "hi"})
	ringHost(t, b)
	buf := make([]byte, 16)
	n, err := b.ChildFiles()[1].Read(buf) // the shim's wait for a ring
	require.NoError(t, err)
	require.Positive(t, n)
	assert.Equal(t, response{ID: 1, OK: true, Content: "hi"}, h.mustResponse(1))

	st := finalStats(t, srv)
	// Rung before its unlink, the marker is gone once the sweep settled.
	assert.False(t, h.exists(markerName(1)))
	assert.Equal(t, 1, st.Calls)
	assert.EqualValues(t, 2, st.Bytes)
	assert.Equal(t, []string{"read"}, st.SortedTools())
	assert.False(t, st.AccountingLoss)
}

func TestServerSweepsOnTheFallbackTimerWithoutBells(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	srv := h.start()
	for id := int64(1); id <= 3; id++ {
		h.request(id, "read", nil)
		waitFor(t, "the answer", h.answered(id))
	}
	assert.Equal(t, 3, finalStats(t, srv).Calls)
}

func TestServerSweepsOnceMoreForAWakeThatArrivedMidSweep(t *testing.T) {
	slow := newBlocker("read")
	h := newHarness(t, slow, echoTool("ls"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour
	srv := h.start()

	h.request(1, "read", nil)
	ringHost(t, b)
	slow.waitStart(t)
	// The in-flight sweep listed the directory before this request.
	h.request(2, "ls", nil)
	ringHost(t, b)
	close(slow.release)
	waitFor(t, "the answer to the request published mid-sweep", h.answered(2))

	st := finalStats(t, srv)
	assert.Equal(t, 2, st.Calls)
	assert.Zero(t, st.Errors)
}

func TestEveryServerOfAKernelIsWokenByOneRing(t *testing.T) {
	first := newHarness(t, echoTool("read"))
	b := first.withBells()
	first.cfg.PollInterval = time.Hour
	second := newHarness(t, echoTool("read"))
	second.cfg.Bells = b
	second.cfg.PollInterval = time.Hour
	first.start()
	second.start()

	first.request(1, "read", map[string]any{"text": "one"})
	second.request(1, "read", map[string]any{"text": "two"})
	ringHost(t, b)
	waitFor(t, "the first cell's answer", first.answered(1))
	waitFor(t, "the second cell's answer", second.answered(1))
	assert.Equal(t, "one", first.mustResponse(1).Content)
	assert.Equal(t, "two", second.mustResponse(1).Content)
}

func TestServerLedgerHearsReservationThenClaimBeforeTheMarkerExists(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	type feed struct {
		id            int64
		kind          claimKind
		tool          string
		inLedger      bool
		markerExists  bool
		requestExists bool
	}
	var (
		mu    sync.Mutex
		feeds []feed
		srvp  atomic.Pointer[Server]
		ready = make(chan struct{})
	)
	h.cfg.onClaim = func(id int64, kind claimKind, tool string) {
		<-ready
		srv := srvp.Load()
		srv.ledgerMu.Lock()
		recorded := srv.ledger[id] == ledgerEntry{Kind: kind, Tool: tool}
		srv.ledgerMu.Unlock()
		mu.Lock()
		feeds = append(feeds, feed{id, kind, tool, recorded, h.exists(markerName(id)), h.exists(h.reqName(id))})
		mu.Unlock()
	}
	srv := h.start()
	srvp.Store(srv)
	close(ready)

	h.request(1, "read", nil)
	waitFor(t, "the answer", h.answered(1))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []feed{
		{1, claimReserved, "", true, false, true},
		{1, claimClaimed, "read", true, false, true},
	}, feeds, "the server's ledger holds each entry before the observer hears it, and before the marker exists")
	assert.Equal(t, 1, finalStats(t, srv).Calls)
}

// abortInFlight starts a server, claims n blocking calls and aborts while
// all are in flight.
func abortInFlight(t *testing.T, n int64) (*harness, *blocker, Stats) {
	h, slow, srv := inFlight(t, n)
	abort(srv)
	return h, slow, finalStats(t, srv)
}

// inFlight starts a server whose one sweep claims n calls of a tool that
// blocks until the cell's end.
func inFlight(t *testing.T, n int64) (*harness, *blocker, *Server) {
	slow := newBlocker("read")
	h := newHarness(t, slow)
	h.cfg.PollInterval = time.Millisecond
	// Published before the server starts, so one sweep claims them all.
	for id := int64(1); id <= n; id++ {
		h.request(id, "read", nil)
	}
	srv := h.start()
	for range n {
		slow.waitStart(t)
	}
	return h, slow, srv
}

func TestAbortDuringTwoInFlightDispatchesAnswersBothInterrupted(t *testing.T) {
	h, slow, st := abortInFlight(t, 2)
	assertBothInterrupted(t, h, slow, st)
}

// assertBothInterrupted: the two calls in flight at the cell's end were
// each answered interrupted once, charged, the loss flagged, no marker
// left, and their tool never completed.
func assertBothInterrupted(t *testing.T, h *harness, slow *blocker, st Stats) {
	t.Helper()
	for id := int64(1); id <= 2; id++ {
		assert.Equal(t, response{ID: id, Error: msgInterrupted}, h.mustResponse(id))
		assert.False(t, h.exists(markerName(id)))
	}
	assert.Equal(t, 2, st.Calls)
	assert.Equal(t, 2, st.Errors)
	assert.True(t, st.AccountingLoss)
	waitFor(t, "the dispatches to see the abort", func() bool { return slow.canceled.Load() == 2 })
	for _, e := range slow.Events() {
		assert.NotContains(t, e, "end", "a blocked tool never completes")
	}
}

func TestAbortedSweepsThreeClaimsAreAnsweredOnceAndNeverRerun(t *testing.T) {
	h, slow, st := abortInFlight(t, 3)
	for id := int64(1); id <= 3; id++ {
		assert.Equal(t, msgInterrupted, h.mustResponse(id).Error)
	}
	assert.Equal(t, 3, st.Calls)
	assert.Equal(t, 3, st.Errors)
	assert.EqualValues(t, 3, slow.runs.Load(), "never re-run")
	var left []string
	for _, name := range h.names() {
		if strings.HasSuffix(name, claimSuffix) {
			left = append(left, name)
		}
	}
	assert.Empty(t, left, "recovery removed every marker")
}

func TestAbortRightAfterAPublishedAnswerKeepsTheRealAccounting(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	published := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	h.hooks.unlink = func(path string) error {
		if filepath.Base(path) == markerName(1) {
			// The answer is on disk; the sweep has not returned yet.
			once.Do(func() {
				close(published)
				<-release
			})
		}
		return syscall.Unlink(path)
	}
	srv := h.start()
	h.request(1, "read", map[string]any{"text": "real"})
	<-published
	require.Equal(t, "real", h.mustResponse(1).Content)

	aborted := make(chan struct{})
	go func() {
		defer close(aborted)
		abort(srv)
	}()
	close(release)
	<-aborted

	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.Zero(t, st.Errors)
	assert.EqualValues(t, 4, st.Bytes)
	assert.Equal(t, []string{"read"}, st.SortedTools())
	assert.False(t, st.AccountingLoss, "the sweep finished: nothing was lost")
	assert.Equal(t, "real", h.mustResponse(1).Content)
}

func TestAbortAnswersAClaimWhoseMarkerTheScriptDeletedFromTheLedger(t *testing.T) {
	slow := newBlocker("webfetch")
	h := newHarness(t, slow)
	h.cfg.PollInterval = time.Millisecond
	srv := h.start()
	h.request(1, "webfetch", nil)
	slow.waitStart(t)
	require.NoError(t, os.Remove(h.path(markerName(1))), "the script destroys its marker")

	abort(srv)
	st := finalStats(t, srv)
	assert.Equal(t, response{ID: 1, Error: msgInterrupted}, h.mustResponse(1))
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors)
	assert.True(t, st.AccountingLoss)
	assert.Empty(t, st.SortedTools(), "an unproven call adds no tool")
}

func TestAbortWithNothingInFlightKeepsExactStatsAndSweepsNoMore(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	b := h.withBells()
	h.cfg.PollInterval = time.Millisecond
	srv := h.start()
	h.request(1, "read", nil)
	waitFor(t, "the answer", h.answered(1))

	abort(srv)
	abort(srv) // idempotent
	h.request(2, "read", nil)
	ringHost(t, b)
	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.False(t, st.AccountingLoss)

	// Once aborted, neither rings nor the timer sweep: request 2 stays.
	time.Sleep(20 * time.Millisecond)
	assert.True(t, h.exists(h.reqName(2)))
	assert.EqualValues(t, 1, read.runs.Load())
}

func TestAPanickingSweepIsSettledConservativelyAndTheServerKeepsServing(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Millisecond
	logs := h.captureLog()
	var fired atomic.Bool
	secret := h.token
	h.hooks.unlink = func(path string) error {
		// A fault in the sweep body after answer 1 was published, with a
		// payload that must never be logged.
		if filepath.Base(path) == markerName(1) && fired.CompareAndSwap(false, true) {
			panic(errors.New("sweep broke holding " + secret))
		}
		return syscall.Unlink(path)
	}
	h.request(1, "read", map[string]any{"text": "one"})
	h.request(2, "read", map[string]any{"text": "two"})
	srv := h.start() // one sweep claims both
	waitFor(t, "the sweep to fault", fired.Load)
	waitFor(t, "recovery to answer call 2", h.answered(2))

	st := finalStats(t, srv)
	assert.Equal(t, "one", h.mustResponse(1).Content, "the published answer survives")
	assert.Equal(t, msgInterrupted, h.mustResponse(2).Error)
	assert.Equal(t, 2, st.Calls)
	assert.Equal(t, 1, st.Errors)
	assert.EqualValues(t, 3, st.Bytes, "call 1's real accounting is restored from its answer")
	assert.True(t, st.AccountingLoss)
	assert.Contains(t, logs.String(), "execute_code rpc sweep failed (*errors.errorString); settling conservatively")
	assert.NotContains(t, logs.String(), secret)

	// Later sweeps keep serving, and the settled ids stay remembered.
	require.NoError(t, os.Remove(h.path(responseName(2))))
	h.request(2, "read", nil)
	h.request(3, "read", map[string]any{"text": "three"})
	waitFor(t, "the answer to call 3", h.answered(3))
	waitFor(t, "the replay to be refused", h.answered(2))
	assert.Equal(t, msgReplayed, h.mustResponse(2).Error)
	assert.Equal(t, "three", h.mustResponse(3).Content)
	st = finalStats(t, srv)
	assert.Equal(t, 3, st.Calls)
	assert.EqualValues(t, 3, read.runs.Load(), "call 2 ran once; the replay did not run it")
}

func TestASweepThatDiesRightAfterTheReservationIsChargedOneCallAndOneError(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Millisecond
	var died atomic.Bool
	h.cfg.onClaim = func(_ int64, kind claimKind, _ string) {
		if kind == claimReserved && died.CompareAndSwap(false, true) {
			runtime.Goexit() // the sweep goroutine dies right after the feed
		}
	}
	logs := h.captureLog()
	srv := h.start()
	h.request(1, "read", nil)
	// The next sweep finds the leftover request and refuses it as a
	// replay: the settled reservation remembered the id.
	waitFor(t, "the leftover request's answer", h.answered(1))

	st := finalStats(t, srv)
	assert.Equal(t, msgReplayed, h.mustResponse(1).Error)
	assert.Equal(t, 1, st.Calls, "one call charged, once")
	assert.Equal(t, 2, st.Errors, "the dead reservation and the refused replay")
	assert.True(t, st.AccountingLoss)
	assert.Zero(t, read.runs.Load())
	assert.False(t, h.exists(markerName(1)))
	assert.Contains(t, logs.String(), "execute_code rpc sweep failed (exit); settling conservatively")
}

// gatePolicy blocks its first decision until released, ignoring every
// context, as a stuck policy would, then denies.
type gatePolicy struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (p *gatePolicy) Allowed(string) (bool, string) {
	p.once.Do(func() {
		close(p.entered)
		<-p.release
	})
	return false, "Tool 'read' is in deny list"
}

func (*gatePolicy) RequiresApproval(string) bool { return false }

func TestALateResultOfAnAbandonedSweepCannotOverwriteSettledStats(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	h.hooks.killGrace = 10 * time.Millisecond
	policy := &gatePolicy{entered: make(chan struct{}), release: make(chan struct{})}
	h.cfg.Policy = policy
	stale := make(chan uint64, 1)
	h.hooks.onStale = func(gen uint64) { stale <- gen }
	srv := h.start()
	h.request(1, "read", nil)
	<-policy.entered

	abort(srv) // the sweep ignores its cancellation: abandoned
	settled := finalStats(t, srv)
	assert.Equal(t, 1, settled.Calls, "the reservation in the ledger is charged")
	assert.Equal(t, 1, settled.Errors)
	assert.True(t, settled.AccountingLoss)

	// The abandoned sweep now completes normally, with its own figures.
	close(policy.release)
	select {
	case <-stale:
	case <-time.After(10 * time.Second):
		t.Fatal("the late result never reached the server")
	}
	assert.Equal(t, settled, finalStats(t, srv), "the late result changed nothing")
}

func TestDrainAndStatsForwardsANotificationWrittenAfterTheLastSweep(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	notes := h.collectNotes()
	srv := h.start()
	h.frame(KindNotify, 1, notifyFrame(t, 1, "early"))
	h.request(1, "read", nil)
	waitFor(t, "the answer", h.answered(1))
	abort(srv) // no sweep after this

	last := h.frame(KindNotify, 2, notifyFrame(t, 2, "last words"))
	st := finalStats(t, srv)
	assert.Equal(t, 2, st.NotifyForwarded)
	assert.Equal(t, []string{"early", "last words"}, notes())
	assert.False(t, h.exists(last))
}

func TestDrainAndStatsWaitsForTheInFlightSweepAndReportsLossWhenItCannot(t *testing.T) {
	slow := newBlocker("read")
	h := newHarness(t, slow)
	h.cfg.PollInterval = time.Millisecond
	srv := h.start()
	h.request(1, "read", nil)
	slow.waitStart(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	st, err := srv.DrainAndStats(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, st.AccountingLoss, "unreadable stats are never trusted")

	close(slow.release)
	st = finalStats(t, srv)
	assert.Equal(t, 1, st.Calls, "the stats include the sweep that was in flight")
	assert.False(t, st.AccountingLoss)
}

func TestStopUnlinksAtMostTenThousandEntriesAndNeverRecurses(t *testing.T) {
	h := newHarness(t)
	h.cfg.PollInterval = time.Hour // nothing but Stop touches the directory
	const files = maxCleanupEntries + 50
	for n := range files {
		require.NoError(t, os.WriteFile(h.path(fmt.Sprintf("text-%d.json", n)), nil, 0o600))
	}
	require.NoError(t, os.MkdirAll(h.path("req-1.json/inner"), 0o700))
	require.NoError(t, os.WriteFile(h.path("req-1.json/inner/keep"), []byte("x"), 0o600))
	require.NoError(t, os.MkdirAll(h.path("notify-x.json"), 0o700))
	srv := h.start()

	srv.Stop(context.Background())
	left := len(h.names())
	removed := files + 2 - left
	assert.LessOrEqual(t, removed, maxCleanupEntries)
	assert.GreaterOrEqual(t, removed, maxCleanupEntries-2, "only the two directories may use up the bound")
	assert.FileExists(t, h.path("req-1.json/inner/keep"), "directories are never entered")
	assert.DirExists(t, h.path("notify-x.json"))

	srv.Stop(context.Background()) // idempotent: no second cleanup
	assert.Len(t, h.names(), left)
	_, err := srv.DrainAndStats(context.Background())
	assert.ErrorIs(t, err, errStopped)
	srv.Abort(context.Background()) // harmless once stopped
}

func TestStopDrainsNotificationsAndNeverARequest(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Hour
	var forwarded atomic.Int64
	h.cfg.OnNotify = func(string) { forwarded.Add(1) }
	srv := h.start()
	h.request(1, "read", nil)
	h.frame(KindNotify, 1, notifyFrame(t, 1, "bye"))
	srv.Stop(context.Background())
	assert.EqualValues(t, 1, forwarded.Load())
	assert.Zero(t, read.runs.Load())
	assert.Empty(t, h.names(), "protocol files are unlinked")
}

func TestStopCancelsInFlightDispatchesAndLeavesNoGoroutine(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	slow := newBlocker("read")
	h := newHarness(t, slow)
	b := h.withBells()
	h.cfg.PollInterval = time.Millisecond
	for id := int64(1); id <= 2; id++ {
		h.request(id, "read", nil)
	}
	srv, err := StartServer(h.cfg)
	require.NoError(t, err)
	slow.waitStart(t)
	slow.waitStart(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Stop(ctx)
	require.NoError(t, ctx.Err(), "Stop returned because everything ended")
	assert.EqualValues(t, 2, slow.canceled.Load())
	require.NoError(t, b.Close())
	goleak.VerifyNone(t, opts)
}

func TestServerSurvivesABellFloodAndStillAnswers(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	b := h.withBells()
	h.cfg.PollInterval = 100 * time.Millisecond
	var sweeps atomic.Int64
	h.hooks.onSweep = func(int) { sweeps.Add(1) }
	srv := h.start()

	rings := floodWithRequest(t, h, b)
	waitFor(t, "the answer", h.answered(1))

	assert.Equal(t, "through the flood", h.mustResponse(1).Content)
	assert.Equal(t, 1, finalStats(t, srv).Calls)
	t.Logf("%d rings, %d sweeps", rings, sweeps.Load())
	require.Greater(t, rings, int64(1000), "the flood really flooded")
	assert.Less(t, sweeps.Load(), int64(60), "backoff keeps a flood from driving sweeps")
}

func TestACompletedSweepsUnpublishableAnswerLeavesNoMarkerBehind(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour
	logs := h.captureLog()
	// A directory at the response name makes every publish of answer 1 fail.
	require.NoError(t, os.Mkdir(h.path(responseName(1)), 0o700))
	srv := h.start()
	h.request(1, "read", nil)
	ringHost(t, b)
	waitFor(t, "the claim to be made", func() bool { return !h.exists(h.reqName(1)) })
	waitFor(t, "settlement to clear the marker", func() bool { return !h.exists(markerName(1)) })

	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls, "charged once, not again by recovery")
	assert.False(t, st.AccountingLoss)
	assert.DirExists(t, h.path(responseName(1)))
	assert.Contains(t, logs.String(), "execute_code rpc response write failed")
}

func TestAResultFromAnOlderGenerationNeverSettlesTheCurrentSweep(t *testing.T) {
	slow := newBlocker("read")
	h := newHarness(t, slow)
	h.cfg.PollInterval = time.Millisecond
	stale := make(chan uint64, 1)
	h.hooks.onStale = func(gen uint64) { stale <- gen }
	srv := h.start()
	h.request(1, "read", nil)
	slow.waitStart(t)

	// What an abandoned sweep would report, arriving while a newer sweep
	// is in flight: richer stats it must never be allowed to install.
	forged := newStats()
	forged.Calls, forged.Bytes = 50, 1<<20
	srv.results <- sweepResult{gen: 0, stats: forged}
	assert.Zero(t, <-stale)

	close(slow.release)
	waitFor(t, "the answer", h.answered(1))
	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.EqualValues(t, len("done 1"), st.Bytes)
}

func TestStatsIncludeWhatAnAbandonedSweepReservedAfterItWasSettled(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Hour
	srv := h.start()
	abort(srv)
	// A late feed from an abandoned sweep: a reservation of an id no
	// settlement has seen (the feed precedes the spend, so the sweep may
	// have charged it in stats nobody will adopt).
	srv.cfg.onClaim(7, claimReserved, "")
	h.request(7, "read", nil)

	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors)
	_, answered := h.response(7)
	assert.False(t, answered, "a bare reservation is charged, not answered")
	assert.Equal(t, st, finalStats(t, srv), "paid once")
	assert.Zero(t, read.runs.Load())
}
