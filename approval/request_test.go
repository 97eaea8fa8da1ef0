package approval

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

func TestApproverSeesTheCallersPreallocatedID(t *testing.T) {
	var got Request
	h := newHarness(t, Config{Approver: ApproverFunc(func(_ context.Context, req Request) (Decision, error) {
		got = req
		return ApproveOnce, nil
	})})
	id := NewID()
	req := webfetch(id, "https://example.org/", "s1", "a1")

	out, err := h.b.Request(context.Background(), req)

	require.NoError(t, err)
	assert.Equal(t, Outcome{Approved: true, Scope: ApproveOnce}, out)
	assert.Equal(t, req, got, "the approver is asked with the request as given, id included")
	assert.Equal(t, 0, h.b.Pending())
	assert.Equal(t, 1, h.requested())
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalApproveOnce}, h.decisions())
}

func TestRequestWithoutIDGetsANewOne(t *testing.T) {
	var got Request
	h := newHarness(t, Config{Approver: ApproverFunc(func(_ context.Context, req Request) (Decision, error) {
		got = req
		return Deny, nil
	})})

	_, err := h.b.Request(context.Background(), webfetch("", "u", "s", "a"))

	require.NoError(t, err)
	assert.Regexp(t, `^appr_`, got.ID)
}

func TestApproverDecisionsBecomeOutcomes(t *testing.T) {
	tests := []struct {
		d    Decision
		want Outcome
	}{
		{ApproveOnce, Outcome{Approved: true, Scope: ApproveOnce}},
		{ApproveSession, Outcome{Approved: true, Scope: ApproveSession}},
		{ApproveAgent, Outcome{Approved: true, Scope: ApproveAgent}},
		{ApproveGlobal, Outcome{Approved: true, Scope: ApproveGlobal}},
		{Deny, Outcome{Scope: Deny}},
	}
	for _, tt := range tests {
		t.Run(string(tt.d), func(t *testing.T) {
			h := newHarness(t, Config{Approver: ApproverFunc(func(context.Context, Request) (Decision, error) {
				return tt.d, nil
			})})
			out, err := h.b.Request(context.Background(), webfetch(NewID(), "u", "s", "a"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, out)
			assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalDecision(tt.d)}, h.decisions())
		})
	}
}

func TestResolveAnswersTheWaitingRequest(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	p.next(t)

	require.NoError(t, h.b.Resolve(id, ApproveOnce))

	r := h.outcome(res)
	require.NoError(t, r.err)
	assert.Equal(t, Outcome{Approved: true, Scope: ApproveOnce}, r.out)
	assert.Eventually(t, func() bool { return p.endedCalls() == 1 }, waitLimit, time.Millisecond,
		"the approver's context ends when the prompt is resolved elsewhere")
	assert.ErrorIs(t, h.b.Resolve(id, ApproveOnce), ErrNotPending, "a prompt is taken once")
}

func TestFailingApproverFailsTheRequest(t *testing.T) {
	tests := map[string]ApproverFunc{
		"error": func(context.Context, Request) (Decision, error) { return "", errors.New("host prompt broke") },
		"panic": func(context.Context, Request) (Decision, error) { panic("host prompt broke") },
		"not a decision": func(context.Context, Request) (Decision, error) {
			return "maybe", nil
		},
		"cancelled is no decision": func(context.Context, Request) (Decision, error) {
			return "cancelled", nil
		},
	}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{Approver: a})
			id := NewID()
			req := webfetch(id, "u", "s", "a")

			_, err := h.b.Request(context.Background(), req)

			assert.ErrorIs(t, err, ErrApproverFailed)
			assert.Equal(t, 0, h.b.Pending())
			assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalFailed}, h.decisions())
			assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrNotPending, "the failure took the prompt")
		})
	}
}

func TestCallerContextEndCancelsThePrompt(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	ctx, cancel := context.WithCancel(context.Background())
	res := h.request(ctx, webfetch(id, "u", "s", "a"))
	p.next(t)

	cancel()

	r := h.outcome(res)
	require.NoError(t, r.err)
	assert.Equal(t, Outcome{Cancelled: true}, r.out, "a cancelled waiter is denied")
	assert.Equal(t, 0, h.b.Pending())
	assert.Eventually(t, func() bool { return p.endedCalls() == 1 }, waitLimit, time.Millisecond)
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalCancelled}, h.decisions())
	assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrNotPending)
	assert.True(t, h.prompts(webfetch(NewID(), "u", "other", "other")), "no approval was installed")
}

func TestRequestWithDoneContextRegistersNothing(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	out, err := h.b.Request(ctx, webfetch(NewID(), "u", "s", "a"))

	require.NoError(t, err)
	assert.Equal(t, Outcome{Cancelled: true}, out)
	assert.Equal(t, 0, h.requested())
	assert.Empty(t, h.decisions())
}

func TestCancelDeniesTheWaiterAndNamesNotPendingAfterwards(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	h.waitPending(1)

	require.NoError(t, h.b.Cancel(id, "host withdrew it"))

	r := h.outcome(res)
	require.NoError(t, r.err)
	assert.Equal(t, Outcome{Cancelled: true}, r.out)
	assert.ErrorIs(t, h.b.Cancel(id, "again"), ErrNotPending)
	assert.ErrorIs(t, h.b.Cancel(NewID(), "never registered"), ErrNotPending)
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalCancelled}, h.decisions(),
		"losing cancels emit nothing")
}

func TestApproverAnsweringLateChangesNothing(t *testing.T) {
	release := make(chan struct{})
	returned := make(chan struct{})
	var calls atomic.Int32
	h := newHarness(t, Config{Approver: ApproverFunc(func(context.Context, Request) (Decision, error) {
		if calls.Add(1) == 1 {
			defer close(returned)
			<-release // ignores its context
			return ApproveGlobal, nil
		}
		return Deny, nil
	})})
	id := NewID()
	req := webfetch(id, "u", "s", "a")
	res := h.request(context.Background(), req)
	h.waitPending(1)
	require.NoError(t, h.b.Cancel(id, "withdrawn"))
	require.Equal(t, Outcome{Cancelled: true}, h.outcome(res).out)

	close(release)
	<-returned

	h.waitPending(0)
	out, err := h.b.Request(context.Background(), webfetch(NewID(), "u", "s", "a"))
	require.NoError(t, err)
	assert.Equal(t, Outcome{Scope: Deny}, out, "the late approve_global installed nothing: the call is prompted and denied")
	assert.Equal(t, []telemetry.ApprovalDecision{telemetry.ApprovalCancelled, telemetry.ApprovalDeny}, h.decisions())
}

func TestLateAnswerDoesNotResolveALaterPromptWithTheSameID(t *testing.T) {
	release := make(chan struct{})
	returned := make(chan struct{})
	p := newHostPrompt()
	var asked atomic.Int32
	h := newHarness(t, Config{Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
		if asked.Add(1) == 1 {
			defer close(returned)
			<-release
			return ApproveGlobal, nil
		}
		return p.Decide(ctx, req)
	})})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	h.waitPending(1)
	require.NoError(t, h.b.Cancel(id, "withdrawn"))
	h.outcome(res)
	res = h.request(context.Background(), webfetch(id, "u", "s", "a"))
	p.next(t)

	close(release)
	<-returned

	require.Equal(t, 1, h.b.Pending(), "the second prompt still waits for its own answer")
	require.NoError(t, h.b.Resolve(id, Deny))
	assert.Equal(t, Outcome{Scope: Deny}, h.outcome(res).out)
}

func TestDuplicatePendingIDIsRefused(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	h.waitPending(1)

	_, err := h.b.Request(context.Background(), webfetch(id, "v", "s", "a"))

	assert.ErrorIs(t, err, ErrDuplicateID)
	require.NoError(t, h.b.Resolve(id, ApproveOnce))
	assert.Equal(t, Outcome{Approved: true, Scope: ApproveOnce}, h.outcome(res).out, "the first prompt is untouched")
}

func TestInvalidInputsAreRefused(t *testing.T) {
	h := newHarness(t, Config{})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	h.waitPending(1)

	assert.ErrorIs(t, h.b.Resolve(id, "maybe"), ErrInvalidDecision)
	assert.ErrorIs(t, h.b.Resolve(id, "allow"), ErrInvalidDecision, "allow is a spelling for ParseDecision only")
	_, err := h.b.Request(context.Background(), Request{ID: NewID()})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	assert.Equal(t, 1, h.b.Pending(), "refused inputs take nothing")

	require.NoError(t, h.b.Cancel(id, "done"))
	h.outcome(res)
}

func TestStoppingTheBrokerCancelsPromptsAndRefusesNewOnes(t *testing.T) {
	p := newHostPrompt()
	h := newHarness(t, Config{Approver: p})
	id := NewID()
	res := h.request(context.Background(), webfetch(id, "u", "s", "a"))
	p.next(t)

	h.stopBroker()

	r := h.outcome(res)
	require.NoError(t, r.err)
	assert.Equal(t, Outcome{Cancelled: true}, r.out)
	assert.Eventually(t, func() bool { return p.endedCalls() == 1 }, waitLimit, time.Millisecond)
	_, err := h.b.Request(context.Background(), webfetch(NewID(), "u", "s", "a"))
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, h.b.Resolve(id, ApproveGlobal), ErrUnavailable)
	assert.Equal(t, 0, h.b.Pending())
}
