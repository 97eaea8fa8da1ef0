package pump

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

func finish(t *testing.T, srv *Server) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := srv.Finish(ctx)
	require.NoError(t, err)
	return st
}

// Finish settles calls in flight exactly as Abort and DrainAndStats do,
// and nothing is swept afterwards.
func TestFinishDuringInFlightDispatchesSettlesThemAsAbortDoes(t *testing.T) {
	h, slow, srv := inFlight(t, 2)
	assertBothInterrupted(t, h, slow, finish(t, srv))

	h.request(3, "read", nil)
	time.Sleep(20 * time.Millisecond) // twenty fallback periods
	assert.True(t, h.exists(h.reqName(3)), "nothing is claimed after Finish")
	assert.EqualValues(t, 2, slow.runs.Load())
}

// The notifications present at Finish are forwarded and counted; one a
// straggler writes after it reaches nobody, since Stop may run after the
// caller has its answer; Stop still unlinks every protocol file.
func TestFinishForwardsTheCellsLastNotificationsAndStopForwardsNoMore(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	notes := h.collectNotes()
	srv := h.start()
	h.frame(KindNotify, 1, notifyFrame(t, 1, "early"))
	h.request(1, "read", map[string]any{"text": "x"})
	waitFor(t, "the answer", h.answered(1))
	h.frame(KindNotify, 2, notifyFrame(t, 2, "last words"))

	st := finish(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 2, st.NotifyForwarded)
	h.frame(KindNotify, 3, notifyFrame(t, 3, "after the answer"))
	srv.Stop(context.Background())
	assert.Equal(t, []string{"early", "last words"}, notes())
	assert.Empty(t, h.names(), "protocol files are unlinked")
}

// Finish, Abort and DrainAndStats agree in any order, and a Finish after
// Stop reports the stats lost.
func TestFinishAgreesWithAbortAndDrainAndIsLostOnceStopped(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.PollInterval = time.Millisecond
	srv := h.start()
	h.request(1, "read", nil)
	waitFor(t, "the answer", h.answered(1))

	abort(srv)
	st := finish(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.False(t, st.AccountingLoss)
	again := finish(t, srv)
	assert.Equal(t, st.Calls, again.Calls)
	abort(srv) // returns at once: the abort is settled
	assert.Equal(t, st.Calls, finalStats(t, srv).Calls)

	srv.Stop(context.Background())
	lost, err := srv.Finish(context.Background())
	require.ErrorIs(t, err, errStopped)
	assert.True(t, lost.AccountingLoss)
}

// A Finish whose context ends before the loop can answer (its sweep runs
// a tool that ignores the end of the cell) reports the stats lost; the
// loop still settles the cell once the tool returns.
func TestFinishThatCannotWaitReportsTheStatsLost(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	stubborn := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) {
		close(started)
		<-release
		return tools.TextResult("late"), nil
	}}
	h := newHarness(t, stubborn)
	h.cfg.PollInterval = time.Millisecond
	h.hooks.killGrace = time.Minute
	srv := h.start()
	h.request(1, "read", nil)
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := srv.Finish(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, st.AccountingLoss, "unreadable stats are never trusted")
	close(release)
	assert.Equal(t, 1, finish(t, srv).Calls)
}
