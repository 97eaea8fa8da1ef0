package pump

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

func TestEachFailedAuthenticationIsObservedOnce(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	failures := 0
	h.cfg.OnAuthFailure = func() { failures++ }
	h.requestWithToken(1, "forged", "read", nil)
	h.requestWithToken(2, nil, "read", nil)
	h.publish(unauthenticatedRequest(3), []byte("{not json"))
	h.request(4, "read", nil)
	h.sweep()
	assert.Equal(t, 3, failures, "one per refused request, none for the good one")
	assert.Equal(t, 3, h.stats.Denied)
}

func TestAnsweredCallsReportTheirRoundTrip(t *testing.T) {
	failing := &funcTool{name: "grep", fn: func(context.Context, map[string]any) (tools.Result, error) {
		return tools.Result{}, errors.New("no such pattern")
	}}
	h := newHarness(t, echoTool("read"), failing)
	var mu sync.Mutex
	got := map[string]RoundTripOutcome{}
	h.cfg.OnRoundTrip = func(rt RoundTrip) {
		mu.Lock()
		defer mu.Unlock()
		assert.GreaterOrEqual(t, rt.Duration.Nanoseconds(), int64(0))
		got[rt.Tool] = rt.Outcome
	}
	h.request(1, "read", nil)
	h.request(2, "grep", nil)
	h.request(3, "bash", nil) // not available: answered at claim, never dispatched
	h.sweep()
	assert.Equal(t, map[string]RoundTripOutcome{"read": RoundTripOK, "grep": RoundTripError}, got)
}

func TestAPanickingObserverChangesNoAnswer(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.OnAuthFailure = func() { panic("observer") }
	h.cfg.OnRoundTrip = func(RoundTrip) { panic("observer") }
	h.requestWithToken(1, "forged", "read", nil)
	h.request(2, "read", map[string]any{"text": "fine"})
	require.NotPanics(t, h.sweep)
	assert.Equal(t, msgAuthFailed, h.mustResponse(1).Error)
	assert.Equal(t, "fine", h.mustResponse(2).Content)
}
