package approval

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

// The pump's flow for a gated claim: the id is allocated in the sweep,
// the dispatch starts its watcher and then waits on the prompt.
func TestSweepDeathCancelsPromptAndLaterResolveInstallsNothing(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	sweep, dispatch := make(chan struct{}), make(chan struct{})
	h.b.Watch(id, sweep, dispatch)
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	require.Equal(t, id, p.next(t).ID, "the host is prompted under the pre-allocated id")

	close(sweep)

	assert.Equal(t, watchStep{id: id, which: whichSweep}, h.step(), "the sweep's end took the prompt")
	r := h.outcome(res)
	require.NoError(t, r.err)
	assert.Equal(t, Outcome{Cancelled: true}, r.out, "the dispatch is denied")
	assert.Equal(t, 0, h.b.Pending(), "the prompt is gone")
	assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrNotPending)
	assert.True(t, h.prompts(webfetch("", "u", "other", "other")), "no global approval exists")
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalCancelled, telemetry.ApprovalCancelled}, h.decisions(),
		"the sweep's cancel, then the probe's own")

	close(dispatch)
	assert.Equal(t, watchStep{id: id, which: whichDispatch, err: ErrNotPending}, h.step())
	assert.Equal(t, watchStep{id: id, which: whichStopped}, h.step())
}

// A dispatch that outlives its sweep (its tool ignores the sweep's death)
// registers its prompt after the watcher's first cancel found nothing.
func TestPromptRegisteredAfterTheSweepDiedIsCancelledWhenTheDispatchEnds(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	sweep, dispatch := make(chan struct{}), make(chan struct{})
	h.b.Watch(id, sweep, dispatch)
	close(sweep)
	require.Equal(t, watchStep{id: id, which: whichSweep, err: ErrNotPending}, h.step(),
		"the first cancel ran before the prompt existed")

	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	p.next(t)
	require.Equal(t, 1, h.b.Pending(), "boundary: the prompt outlives its sweep while its dispatch runs")
	require.Empty(t, res)

	close(dispatch)

	assert.Equal(t, watchStep{id: id, which: whichDispatch}, h.step(), "the second cancel took the prompt")
	assert.Equal(t, watchStep{id: id, which: whichStopped}, h.step())
	r := h.outcome(res)
	require.NoError(t, r.err)
	assert.Equal(t, Outcome{Cancelled: true}, r.out)
	assert.Equal(t, 0, h.b.Pending())
	assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrNotPending)
	assert.True(t, h.prompts(webfetch("", "u", "other", "other")), "no global approval exists")
}

func TestWatcherStopsOnlyOnceBothEnded(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	sweep, dispatch := make(chan struct{}), make(chan struct{})
	h.b.Watch(id, sweep, dispatch)

	close(dispatch)
	assert.Equal(t, watchStep{id: id, which: whichDispatch, err: ErrNotPending}, h.step())
	assert.Empty(t, h.steps, "still watching the sweep")

	close(sweep)
	assert.Equal(t, watchStep{id: id, which: whichSweep, err: ErrNotPending}, h.step())
	assert.Equal(t, watchStep{id: id, which: whichStopped}, h.step())
}

func TestWatcherOfAlreadyEndedSweepAndDispatchCancelsTwiceAndStops(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	sweep, dispatch := make(chan struct{}), make(chan struct{})
	close(sweep)
	close(dispatch)

	h.b.Watch(id, sweep, dispatch)

	seen := map[string]bool{}
	for range 2 {
		s := h.step()
		assert.ErrorIs(t, s.err, ErrNotPending)
		seen[s.which] = true
	}
	assert.Equal(t, map[string]bool{whichSweep: true, whichDispatch: true}, seen)
	assert.Equal(t, watchStep{id: id, which: whichStopped}, h.step())
}

func TestWatcherCancelsOnlyItsOwnPrompt(t *testing.T) {
	h := newHarness(t, Config{})
	mine, other := NewID(), NewID()
	sweep, dispatch := make(chan struct{}), make(chan struct{})
	h.b.Watch(mine, sweep, dispatch)
	res := h.request(context.Background(), webfetch(other, "u", "s", "a"))
	h.waitPending(1)

	close(sweep)
	close(dispatch)
	for range 3 {
		h.step()
	}

	assert.Equal(t, 1, h.b.Pending())
	require.NoError(t, h.b.Resolve(other, ApproveOnce))
	assert.Equal(t, Outcome{Approved: true, Scope: ApproveOnce}, h.outcome(res).out)
}

func TestStoppingTheBrokerStopsItsWatchers(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	// Never closed: only the broker's end stops this watcher.
	h.b.Watch(id, make(chan struct{}), make(chan struct{}))
	h.waitPending(0) // the watch message was handled

	h.stopBroker()

	assert.Equal(t, watchStep{id: id, which: whichStopped}, h.step())
}
