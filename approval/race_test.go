package approval

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

const takers = 64

// race runs n takers at once and returns their errors.
func race(n int, take func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = take(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// winners counts nil errors and requires every other error to be
// ErrNotPending.
func winners(t *testing.T, errs []error) int {
	t.Helper()
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
			continue
		}
		require.ErrorIs(t, err, ErrNotPending)
	}
	return n
}

func TestConcurrentResolveAndCancelHaveExactlyOneWinner(t *testing.T) {
	h := newHarness(t, Config{})
	for round := range 40 {
		id := NewID()
		url := "https://example.org/" + id
		res := h.request(context.Background(), webfetch(id, url, "s", "a"))
		h.waitPending(1)
		before := len(h.decisions())

		errs := race(takers, func(i int) error {
			if i%2 == 0 {
				return h.b.Resolve(id, ApproveGlobal)
			}
			return h.b.Cancel(id, "race")
		})

		require.Equal(t, 1, winners(t, errs), "round %d", round)
		won := -1
		for i, err := range errs {
			if err == nil {
				won = i
			}
		}
		r := h.outcome(res)
		require.NoError(t, r.err)
		got := h.decisions()[before:]
		if won%2 == 0 {
			assert.Equal(t, Outcome{Approved: true, Scope: ApproveGlobal}, r.out)
			assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalApproveGlobal}, got)
			assert.False(t, h.prompts(webfetch("", url, "elsewhere", "other")), "the winning resolve installed its approval")
		} else {
			assert.Equal(t, Outcome{Cancelled: true}, r.out)
			assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalCancelled}, got, "losers emit nothing")
			assert.True(t, h.prompts(webfetch("", url, "elsewhere", "other")), "losing resolves installed nothing")
		}
		assert.Equal(t, 0, h.b.Pending())
	}
}

// Every kind of taker at once: resolves, cancels, the Approver's own
// answer and the waiter's context ending.
func TestAllTransitionsRacingOnOnePromptHaveExactlyOneWinner(t *testing.T) {
	var mu sync.Mutex
	gates := map[string]chan struct{}{}
	gate := func(id string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if gates[id] == nil {
			gates[id] = make(chan struct{})
		}
		return gates[id]
	}
	h := newHarness(t, Config{Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
		select {
		case <-gate(req.ID):
			return ApproveGlobal, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})})
	for round := range 40 {
		id := NewID()
		url := "https://example.org/" + id
		ctx, cancel := context.WithCancel(context.Background())
		res := h.request(ctx, webfetch(id, url, "s", "a"))
		h.waitPending(1)
		before := len(h.decisions())

		errs := race(takers+2, func(i int) error {
			switch {
			case i == takers:
				close(gate(id)) // the approver answers
				return errors.New("not a taker")
			case i == takers+1:
				cancel()
				return errors.New("not a taker")
			case i%2 == 0:
				return h.b.Resolve(id, ApproveSession)
			default:
				return h.b.Cancel(id, "race")
			}
		})

		r := h.outcome(res)
		require.NoError(t, r.err)
		h.waitPending(0)
		direct := winners(t, errs[:takers])
		require.LessOrEqual(t, direct, 1, "round %d", round)
		got := h.decisions()[before:]
		require.Len(t, got, 1, "exactly one transition took the prompt (round %d)", round)
		switch got[0] {
		case telemetry.ApprovalApproveSession:
			assert.Equal(t, 1, direct)
			assert.Equal(t, Outcome{Approved: true, Scope: ApproveSession}, r.out)
		case telemetry.ApprovalApproveGlobal: // the approver won
			assert.Equal(t, 0, direct)
			assert.Equal(t, Outcome{Approved: true, Scope: ApproveGlobal}, r.out)
		case telemetry.ApprovalCancelled: // a Cancel or the waiter's own
			assert.Equal(t, Outcome{Cancelled: true}, r.out)
		default:
			t.Fatalf("round %d: unexpected decision %s", round, got[0])
		}
		prompted := h.prompts(webfetch("", url, "s", "a"))
		assert.Equal(t, got[0] == telemetry.ApprovalCancelled, prompted,
			"an approval is stored exactly when an approve_* won (round %d)", round)
	}
}

func TestLosingResolvesAfterACancelInstallNothing(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	p.next(t)
	require.NoError(t, h.b.Cancel(id, "withdrawn"))

	errs := race(takers, func(i int) error {
		if i%2 == 0 {
			return h.b.Resolve(id, ApproveGlobal)
		}
		return h.b.Resolve(id, ApproveSession)
	})

	assert.Equal(t, 0, winners(t, errs))
	assert.Equal(t, Outcome{Cancelled: true}, h.outcome(res).out)
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalCancelled}, h.decisions())
	assert.True(t, h.prompts(webfetch("", "u", "s", "a")), "a later request for the same call still prompts")
}
