package pump

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

// sweepAsync runs one sweep in the background; the returned channel
// delivers its error.
func (h *harness) sweepAsync(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- sweepOnce(ctx, h.cfg, &h.stats) }()
	return done
}

func TestWaveStartsEveryCallBeforeAnyCompletes(t *testing.T) {
	b := newBlocker("read")
	h := newHarness(t, b)
	h.cfg.MaxParallel = 4
	for id := int64(1); id <= 3; id++ {
		h.request(id, "read", nil)
	}
	done := h.sweepAsync(context.Background())
	started := map[int64]bool{}
	for range 3 {
		started[b.waitStart(t)] = true
	}
	assert.Equal(t, map[int64]bool{1: true, 2: true, 3: true}, started)
	for _, e := range b.Events() {
		assert.NotContains(t, e, "end", "nothing completed before all three started")
	}
	close(b.release)
	require.NoError(t, <-done)
	for id := int64(1); id <= 3; id++ {
		assert.Equal(t, fmt.Sprintf("done %d", id), h.mustResponse(id).Content)
	}
}

func TestNextWaveStartsOnlyAfterTheWholeWaveFinished(t *testing.T) {
	b := newBlocker("read")
	b.perID = map[int64]chan struct{}{1: make(chan struct{}), 2: make(chan struct{}), 3: make(chan struct{})}
	h := newHarness(t, b)
	h.cfg.MaxParallel = 2
	for id := int64(1); id <= 3; id++ {
		h.request(id, "read", nil)
	}
	done := h.sweepAsync(context.Background())
	first := []int64{b.waitStart(t), b.waitStart(t)}
	assert.ElementsMatch(t, []int64{1, 2}, first)

	// Finish one call of the wave and let the sweep answer it: a pool
	// (rather than waves) would now start call 3.
	close(b.perID[1])
	waitFor(t, "the answer to call 1", func() bool {
		_, ok := h.response(1)
		return ok
	})
	assert.Empty(t, b.started, "call 3 must not start while call 2 of wave 1 runs")

	close(b.perID[2])
	assert.EqualValues(t, 3, b.waitStart(t))
	close(b.perID[3])
	require.NoError(t, <-done)

	ev := b.Events()
	require.Len(t, ev, 6)
	assert.Equal(t, "start 3", ev[4], "call 3 started after both ends: %v", ev)
}

func TestToolsOutsideTheConfiguredSetAreNotAvailable(t *testing.T) {
	h := newHarness(t, echoTool("read"), echoTool("ls"))
	names := []string{"bash", "write", "edit", "patch", "agent", "execute_code", "grep", ""}
	for i, name := range names {
		h.request(int64(i+1), name, nil)
	}
	h.sweep()
	for i, name := range names {
		assert.Equal(t, fmt.Sprintf("tool '%s' is not available inside execute_code scripts", name), h.mustResponse(int64(i+1)).Error)
	}
	assert.Equal(t, len(names), h.stats.Calls)
	assert.Equal(t, len(names), h.stats.Errors)
}

type denyPolicy map[string]string

func (p denyPolicy) Allowed(tool string) (bool, string) {
	reason, denied := p[tool]
	return !denied, reason
}

func (denyPolicy) RequiresApproval(string) bool { return false }

func TestPolicyDenialIsAnsweredWithItsReasonAndCountedAsDenied(t *testing.T) {
	read, ls, grep := echoTool("read"), echoTool("ls"), echoTool("grep")
	h := newHarness(t, read, ls, grep)
	h.cfg.Policy = denyPolicy{"read": "Tool 'read' is in deny list", "ls": ""}
	h.request(1, "read", nil)
	h.request(2, "ls", nil)
	h.request(3, "grep", nil)
	h.sweep()
	assert.Equal(t, "Tool 'read' is in deny list", h.mustResponse(1).Error)
	assert.Equal(t, "tool 'ls' denied by policy", h.mustResponse(2).Error)
	assert.True(t, h.mustResponse(3).OK)
	assert.Equal(t, 2, h.stats.Denied)
	assert.Zero(t, h.stats.Errors)
	assert.Equal(t, 3, h.stats.Calls)
	assert.Zero(t, read.runs.Load()+ls.runs.Load())
}

type panicPolicy struct{}

func (panicPolicy) Allowed(string) (bool, string) { panic("policy store unreachable") }

func (panicPolicy) RequiresApproval(string) bool { return false }

func TestAPanickingPolicyAnswersRequestFailedWithoutChargingTheCall(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.Policy = panicPolicy{}
	h.request(1, "read", nil)
	h.sweep()
	assert.Equal(t, msgRequestFailed, h.mustResponse(1).Error)
	assert.Zero(t, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
	assert.Contains(t, h.stats.Seen, int64(1))
	assert.Zero(t, read.runs.Load())
	assert.False(t, h.exists(h.reqName(1)))
}

func TestToolErrorsAndPanicsAreAnsweredAndThePumpKeepsServing(t *testing.T) {
	fail := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) {
		return tools.Result{}, errors.New("no such file")
	}}
	panicky := &funcTool{name: "grep", fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		switch p["how"] {
		case "error":
			panic(errors.New("index corrupted"))
		case "string":
			panic("regex engine exploded")
		case "runtime":
			var m map[string]int
			m["x"] = 1
		}
		panic(42)
	}}
	h := newHarness(t, fail, panicky, echoTool("ls"))
	h.request(1, "read", nil)
	h.request(2, "grep", map[string]any{"how": "error"})
	h.request(3, "grep", map[string]any{"how": "string"})
	h.request(4, "grep", map[string]any{"how": "runtime"})
	h.request(5, "grep", map[string]any{"how": "other"})
	h.request(6, "ls", nil)
	h.sweep()
	assert.Equal(t, response{ID: 1, Error: "no such file"}, h.mustResponse(1))
	assert.Equal(t, "index corrupted", h.mustResponse(2).Error)
	assert.Equal(t, "regex engine exploded", h.mustResponse(3).Error)
	assert.Equal(t, msgRequestFailed, h.mustResponse(4).Error)
	assert.Equal(t, msgRequestFailed, h.mustResponse(5).Error)
	assert.True(t, h.mustResponse(6).OK)
	assert.Equal(t, 5, h.stats.Errors)
	assert.Equal(t, 6, h.stats.Calls)

	h.request(7, "ls", nil)
	h.sweep()
	assert.True(t, h.mustResponse(7).OK, "still serving")
}

func TestMixedContentShowsNonTextBlocksAsPlaceholders(t *testing.T) {
	mixed := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) {
		return tools.Result{Content: []tools.Content{
			{Type: "text", Text: "before"}, {Type: "image"}, {Type: "text", Text: "after"},
		}}, nil
	}}
	h := newHarness(t, mixed)
	h.request(1, "read", nil)
	h.sweep()
	assert.Equal(t, "before\n[non-text content omitted]\nafter", h.mustResponse(1).Content)
}

func TestInFlightCallHasAMarkerAndNoRequestFile(t *testing.T) {
	b := newBlocker("read")
	h := newHarness(t, b)
	h.request(1, "read", nil)
	done := h.sweepAsync(context.Background())
	b.waitStart(t)
	assert.True(t, h.exists(markerName(1)))
	assert.False(t, h.exists(h.reqName(1)))
	close(b.release)
	require.NoError(t, <-done)
	assert.True(t, h.mustResponse(1).OK)
	assert.False(t, h.exists(markerName(1)), "marker removed after the answer")
}

func TestToolsGetParamsAsDecodedJSON(t *testing.T) {
	var got map[string]any
	read := &funcTool{name: "read", fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		got = p
		return tools.TextResult(""), nil
	}}
	h := newHarness(t, read)
	h.request(1, "read", map[string]any{"path": "a.txt", "offset": 3, "literal": true})
	h.sweep()
	assert.Equal(t, map[string]any{"path": "a.txt", "offset": float64(3), "literal": true, "id": float64(1)}, got)
}
