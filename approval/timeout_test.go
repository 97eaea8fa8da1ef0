package approval

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

func TestUnansweredPromptTimesOutAndInstallsNothing(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	req := webfetch(id, "u", "s", "a")
	req.Timeout = time.Millisecond

	out, err := h.b.Request(context.Background(), req)

	require.NoError(t, err)
	assert.Equal(t, Outcome{TimedOut: true}, out)
	assert.Equal(t, 0, h.b.Pending())
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalTimeout}, h.decisions())
	assert.Eventually(t, func() bool { return p.endedCalls() == 1 }, waitLimit, time.Millisecond,
		"the approver's context ends with the timeout")
	assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrNotPending, "a resolve after the timeout loses")
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalTimeout}, h.decisions())
	assert.True(t, h.prompts(webfetch("", "u", "other", "other")), "no approval was installed")
}

func TestTimeoutLosingToResolveReturnsTimedOutWithoutEffects(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	resolved := make(chan error, 1)
	// The timer has fired; before the timeout transition reaches the
	// broker, the host's resolve takes the prompt.
	h.b.beforeExpire = func(string) { resolved <- h.b.Resolve(id, ApproveSession) }
	req := webfetch(id, "u", "s", "a")
	req.Timeout = time.Millisecond

	out, err := h.b.Request(context.Background(), req)

	require.NoError(t, err)
	require.NoError(t, <-resolved, "the resolve won")
	assert.Equal(t, Outcome{TimedOut: true}, out, "a losing timeout still returns timed out")
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalApproveSession}, h.decisions(),
		"the losing timeout emits no timeout event")
	_, scope := h.probe(webfetch("", "u", "s", "a"))
	assert.Equal(t, ApproveSession, scope, "the winner's effects stand")
}

func TestResolveLosingToTimeoutInstallsNothing(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	req := webfetch(id, "u", "s", "a")
	req.Timeout = time.Millisecond
	res := h.request(context.Background(), req)
	require.Equal(t, Outcome{TimedOut: true}, h.outcome(res).out)

	assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrNotPending)

	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalTimeout}, h.decisions())
	assert.True(t, h.prompts(webfetch("", "u", "x", "y")), "no global approval")
}

func TestTimeoutRacingResolveHasExactlyOneWinner(t *testing.T) {
	h := newHarness(t, Config{})
	for round := range 100 {
		id := NewID()
		url := "https://example.org/" + id
		req := webfetch(id, url, "s", "a")
		req.Timeout = time.Duration(round%5+1) * 50 * time.Microsecond
		before := len(h.decisions())
		res := h.request(context.Background(), req)
		h.waitPendingOrDone(res)

		err := h.b.Resolve(id, ApproveGlobal)
		r := h.outcome(res)

		require.NoError(t, r.err)
		got := h.decisions()[before:]
		require.Len(t, got, 1, "round %d", round)
		if err == nil {
			assert.Equal(t, telemetry.ApprovalApproveGlobal, got[0])
			assert.True(t, r.out == Outcome{Approved: true, Scope: ApproveGlobal} || r.out == Outcome{TimedOut: true},
				"round %d: %+v", round, r.out)
			assert.False(t, h.prompts(webfetch("", url, "x", "y")), "round %d", round)
		} else {
			require.ErrorIs(t, err, ErrNotPending)
			assert.Equal(t, telemetry.ApprovalTimeout, got[0])
			assert.Equal(t, Outcome{TimedOut: true}, r.out)
			assert.True(t, h.prompts(webfetch("", url, "x", "y")), "round %d", round)
		}
	}
}

// waitPendingOrDone waits until the request's prompt was registered: it
// is pending, or it has already been taken (the request returned). The
// result, if any, stays readable from res.
func (h *harness) waitPendingOrDone(res <-chan result) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		return len(res) > 0 || h.b.Pending() > 0
	}, waitLimit, 10*time.Microsecond)
}
