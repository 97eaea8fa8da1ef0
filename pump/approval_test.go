package pump

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/tools"
)

// startBroker runs a real approval broker on its own actor system; the
// test's cleanup stops both.
func startBroker(t *testing.T, a approval.Approver) *approval.Broker {
	t.Helper()
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	pid := sys.Root.Spawn(approval.Props(approval.Config{Approver: a}))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
	return approval.NewBroker(sys.Root, pid)
}

// prompter is a host's prompt. It records every request it is asked, then
// answers answer, fails with err, or (answer and err both unset) waits
// like a person who never answers, until the prompt is taken elsewhere.
type prompter struct {
	answer approval.Decision
	err    error
	asked  chan approval.Request
	count  atomic.Int64
}

// gateRead puts read behind approval, answered by p through a broker of
// its own.
func gateRead(t *testing.T, h *harness, p *prompter) {
	h.cfg.Approvals = startBroker(t, p)
	h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}
}

func newPrompter(answer approval.Decision) *prompter {
	return &prompter{answer: answer, asked: make(chan approval.Request, 64)}
}

func (p *prompter) Decide(ctx context.Context, req approval.Request) (approval.Decision, error) {
	p.count.Add(1)
	p.asked <- req
	switch {
	case p.err != nil:
		return "", p.err
	case p.answer == "":
		<-ctx.Done()
		return approval.Deny, ctx.Err()
	}
	return p.answer, nil
}

// next is the next prompt shown, with a hang guard.
func (p *prompter) next(t *testing.T) approval.Request {
	t.Helper()
	select {
	case req := <-p.asked:
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("nobody was prompted")
		return approval.Request{}
	}
}

// neverPrompt fails the test if the host is ever asked.
func neverPrompt(t *testing.T) approval.Approver {
	return approval.ApproverFunc(func(_ context.Context, req approval.Request) (approval.Decision, error) {
		t.Errorf("prompted for %q, which must not prompt", req.Tool)
		return approval.Deny, nil
	})
}

// sameArgs are the params of calls that must be "the same call" to a
// stored approval: the harness adds an id param only when there is none.
func sameArgs() map[string]any { return map[string]any{"id": "same", "text": "hi"} }

func TestPolicyDenialIsAnsweredWithItsReasonNeverPromptsAndCountsDenied(t *testing.T) {
	read, grep, webfetch := echoTool("read"), echoTool("grep"), echoTool("webfetch")
	h := newHarness(t, read, grep, webfetch)
	broker := startBroker(t, neverPrompt(t))
	h.cfg.Approvals = broker
	h.cfg.Policy = tools.Policy{
		Allow:           []string{"read", "webfetch"},
		Deny:            []string{"webfetch"},
		RequireApproval: []string{"webfetch", "grep"},
	}
	ledger := claimLedger{}
	h.cfg.onClaim = ledger.Record
	h.request(1, "webfetch", nil)
	h.request(2, "grep", nil)
	h.request(3, "read", map[string]any{"text": "ungated"})
	h.sweep()

	assert.Equal(t, response{ID: 1, Error: "Tool 'webfetch' is in deny list"}, h.mustResponse(1))
	assert.Equal(t, response{ID: 2, Error: "Tool 'grep' not in allowed list"}, h.mustResponse(2))
	assert.Equal(t, response{ID: 3, OK: true, Content: "ungated"}, h.mustResponse(3))
	assert.Equal(t, 3, h.stats.Calls)
	assert.Equal(t, 2, h.stats.Denied)
	assert.Zero(t, h.stats.Errors)
	assert.Zero(t, webfetch.runs.Load()+grep.runs.Load())
	assert.Equal(t, ledgerEntry{Kind: claimDenied, Tool: "webfetch"}, ledger[1])
	assert.Equal(t, ledgerEntry{Kind: claimDenied, Tool: "grep"}, ledger[2])
	assert.Zero(t, broker.Pending())
}

func TestPolicyNeverWidensTheHelperSet(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.Policy = tools.Policy{Allow: []string{"read", "bash"}}
	h.request(1, "bash", nil)
	h.request(2, "webfetch", nil)
	h.sweep()
	assert.Equal(t, "tool 'bash' is not available inside execute_code scripts", h.mustResponse(1).Error)
	assert.Equal(t, "tool 'webfetch' is not available inside execute_code scripts", h.mustResponse(2).Error)
	assert.Equal(t, 2, h.stats.Errors)
	assert.Zero(t, h.stats.Denied)
}

func TestApprovalOutcomesAreAnsweredAndCountedAsDenied(t *testing.T) {
	cases := []struct {
		name     string
		prompter *prompter
		timeout  time.Duration
		want     response
		runs     int64
	}{
		{name: "denied", prompter: newPrompter(approval.Deny),
			want: response{ID: 1, Error: "approval denied for 'read'"}},
		{name: "timed out", prompter: newPrompter(""), timeout: 20 * time.Millisecond,
			want: response{ID: 1, Error: "approval timed out for 'read'"}},
		{name: "approver failed", prompter: &prompter{err: errors.New("terminal gone"), asked: make(chan approval.Request, 1)},
			want: response{ID: 1, Error: "approval failed for 'read'"}},
		{name: "approved once", prompter: newPrompter(approval.ApproveOnce),
			want: response{ID: 1, OK: true, Content: "hi"}, runs: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			broker := startBroker(t, tc.prompter)
			h.cfg.Approvals = broker
			h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}
			h.cfg.ApprovalContext.Timeout = tc.timeout
			h.request(1, "read", map[string]any{"text": "hi"})
			h.sweep()

			assert.Equal(t, tc.want, h.mustResponse(1))
			assert.Equal(t, tc.runs, read.runs.Load())
			assert.Equal(t, 1, h.stats.Calls)
			assert.Zero(t, h.stats.Errors)
			if tc.want.OK {
				assert.Zero(t, h.stats.Denied)
				assert.Equal(t, []string{"read"}, h.stats.SortedTools())
			} else {
				assert.Equal(t, 1, h.stats.Denied)
				assert.Empty(t, h.stats.ToolsUsed)
			}
			assert.EqualValues(t, 1, tc.prompter.count.Load())
			assert.False(t, h.exists(markerName(1)), "an approval-blocked call is answered in full")
			assert.Zero(t, broker.Pending())
		})
	}
}

func TestAFailedApprovalIsLoggedByCauseNeverByTheApproversWords(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	logs := h.captureLog()
	p := &prompter{err: errors.New("secret-ish host detail"), asked: make(chan approval.Request, 1)}
	gateRead(t, h, p)
	h.request(1, "read", nil)
	h.sweep()
	req := p.next(t)
	assert.Equal(t, "approval failed for 'read'", h.mustResponse(1).Error)
	assert.Contains(t, logs.String(), `"cause":"approver_failed"`)
	assert.NotContains(t, logs.String(), "secret-ish")
	assert.NotContains(t, logs.String(), req.ID)
}

func TestAGoneBrokerFailsTheApprovalClosed(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	defer sys.Shutdown()
	pid := sys.Root.Spawn(approval.Props(approval.Config{Approver: neverPrompt(t)}))
	require.NoError(t, sys.Root.StopFuture(pid).Wait())
	h.cfg.Approvals = approval.NewBroker(sys.Root, pid)
	h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}
	h.request(1, "read", nil)
	h.sweep()
	assert.Equal(t, "approval failed for 'read'", h.mustResponse(1).Error)
	assert.Equal(t, 1, h.stats.Denied)
	assert.Zero(t, read.runs.Load())
}

func TestWithoutABrokerOrAPolicyNothingIsGated(t *testing.T) {
	t.Run("policy without broker", func(t *testing.T) {
		h := newHarness(t, echoTool("read"))
		h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}
		h.request(1, "read", nil)
		h.sweep()
		assert.True(t, h.mustResponse(1).OK)
	})
	t.Run("broker without policy", func(t *testing.T) {
		h := newHarness(t, echoTool("read"))
		h.cfg.Approvals = startBroker(t, neverPrompt(t))
		h.request(1, "read", nil)
		h.sweep()
		assert.True(t, h.mustResponse(1).OK)
	})
}

func TestApproverReceivesTheApprovalIDAllocatedAtClaimTime(t *testing.T) {
	h := newHarness(t, echoTool("read"), echoTool("ls"))
	p := newPrompter(approval.ApproveOnce)
	gateRead(t, h, p)
	h.cfg.ApprovalContext = ApprovalContext{SessionID: "sess-1", AgentID: "agent-1", Timeout: time.Hour}
	h.request(1, "read", map[string]any{"text": "hi"})
	h.request(2, "ls", nil)

	// Claim by hand, so the ids are known before any dispatch exists.
	s := newSweeper(h.cfg, h.lone(), &h.stats)
	l, err := listDir(h.dir)
	require.NoError(t, err)
	sortEntries(l.requests)
	var claims []claim
	for _, e := range l.requests {
		body, err := readBounded(s.path(e.name), true, maxRequestBytes)
		c, ok := s.claim(e, body, err, -1)
		require.True(t, ok)
		claims = append(claims, c)
	}
	require.Len(t, claims, 2)
	for _, c := range claims {
		assert.True(t, strings.HasPrefix(c.approvalID, "appr_"), "every claim gets an id, gated or not: %q", c.approvalID)
	}
	assert.NotEqual(t, claims[0].approvalID, claims[1].approvalID)
	assert.True(t, claims[0].gated)
	assert.False(t, claims[1].gated)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, s.dispatch(ctx, claims))
	req := p.next(t)
	assert.Equal(t, approval.Request{
		ID:        claims[0].approvalID,
		Tool:      "read",
		Args:      map[string]any{"id": float64(1), "text": "hi"},
		Rationale: "Tool execution: read",
		SessionID: "sess-1",
		AgentID:   "agent-1",
		Timeout:   time.Hour,
	}, req)
	assert.EqualValues(t, 1, p.count.Load(), "the ungated ls call never prompts")
	assert.True(t, h.mustResponse(1).OK)
	assert.True(t, h.mustResponse(2).OK)
}

// A prompt that nobody answers, killed with its sweep: nothing it could
// have installed exists, and the next call of the tool prompts again.
func TestKillingTheSweepWhileItsDispatchWaitsOnAPromptCancelsThePrompt(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	p := newPrompter("")
	broker := startBroker(t, p)
	h.cfg.Approvals = broker
	h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}
	h.cfg.ApprovalContext = ApprovalContext{SessionID: "s", AgentID: "a"}

	h.request(1, "read", sameArgs())
	ctx, kill := context.WithCancel(context.Background())
	done := h.sweepAsync(ctx)
	first := p.next(t)
	require.Equal(t, 1, broker.Pending())
	kill()
	require.ErrorIs(t, <-done, context.Canceled)
	waitFor(t, "the prompt to go", func() bool { return broker.Pending() == 0 })
	assert.ErrorIs(t, broker.Resolve(first.ID, approval.ApproveGlobal), approval.ErrNotPending)
	assert.True(t, h.exists(markerName(1)), "the killed sweep's claim is left for recovery")

	h.request(2, "read", sameArgs())
	done = h.sweepAsync(context.Background())
	second := p.next(t)
	assert.NotEqual(t, first.ID, second.ID)
	require.NoError(t, broker.Resolve(second.ID, approval.Deny))
	require.NoError(t, <-done)
	assert.Equal(t, msgInterrupted, h.mustResponse(1).Error)
	assert.Equal(t, "approval denied for 'read'", h.mustResponse(2).Error)
	assert.Zero(t, read.runs.Load())
	assert.EqualValues(t, 2, p.count.Load(), "no approve_global was installed: the same call prompted again")
}

func TestARunEndingWhileAPromptIsPendingCancelsItAndInstallsNothing(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Millisecond
	p := newPrompter("")
	broker := startBroker(t, p)
	h.cfg.Approvals = broker
	h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}

	ctx, endRun := context.WithCancel(context.Background()) // the run's deadline or cancel
	exited := make(chan struct{})
	done := h.runAsync(ctx, exited)
	h.request(1, "read", sameArgs())
	req := p.next(t)
	endRun()
	waitFor(t, "the prompt to go", func() bool { return broker.Pending() == 0 })
	assert.ErrorIs(t, broker.Resolve(req.ID, approval.ApproveGlobal), approval.ErrNotPending)
	close(exited) // the killed script
	st := <-done
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors, "the abandoned claim")
	assert.Zero(t, read.runs.Load())
	_, answered := h.response(1)
	assert.False(t, answered, "nobody waits for the answer of a killed run")
}

func TestDetachingTheOwnerWhileAPromptIsPendingCancelsItAndInstallsNothing(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.PollInterval = time.Millisecond
	p := newPrompter("")
	broker := startBroker(t, p)
	h.cfg.Approvals = broker
	h.cfg.Policy = tools.Policy{RequireApproval: []string{"read"}}
	srv := h.start()
	h.request(1, "read", sameArgs())
	req := p.next(t)

	abort(srv) // what an owner's detach does to its cell
	waitFor(t, "the prompt to go", func() bool { return broker.Pending() == 0 })
	assert.ErrorIs(t, broker.Resolve(req.ID, approval.ApproveGlobal), approval.ErrNotPending)
	st := finalStats(t, srv)
	assert.Equal(t, response{ID: 1, Error: msgInterrupted}, h.mustResponse(1))
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors)
	assert.True(t, st.AccountingLoss)
	assert.Zero(t, read.runs.Load())
}

// approvalModes drives two identical calls through each kind of server:
// a per-call run's and a session cell's.
var approvalModes = []struct {
	name string
	run  func(t *testing.T, h *harness) Stats
}{
	{name: "per-call", run: func(t *testing.T, h *harness) Stats {
		exited := make(chan struct{})
		done := h.runAsync(context.Background(), exited)
		for id := int64(1); id <= 2; id++ {
			h.request(id, "read", sameArgs())
			waitFor(t, "an answer", h.answered(id))
		}
		close(exited)
		return <-done
	}},
	{name: "session", run: func(t *testing.T, h *harness) Stats {
		srv := h.start()
		for id := int64(1); id <= 2; id++ {
			h.request(id, "read", sameArgs())
			waitFor(t, "an answer", h.answered(id))
		}
		return finalStats(t, srv)
	}},
}

func TestApproveSessionLetsTheSameCallRunLaterWithoutAPrompt(t *testing.T) {
	for _, mode := range approvalModes {
		t.Run(mode.name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.cfg.PollInterval = time.Millisecond
			p := newPrompter(approval.ApproveSession)
			gateRead(t, h, p)
			h.cfg.ApprovalContext = ApprovalContext{SessionID: "sess-1", AgentID: "agent-1"}

			st := mode.run(t, h)
			assert.Equal(t, response{ID: 1, OK: true, Content: "hi"}, h.mustResponse(1))
			assert.Equal(t, response{ID: 2, OK: true, Content: "hi"}, h.mustResponse(2))
			assert.EqualValues(t, 1, p.count.Load(), "the stored session approval answered the second call")
			assert.EqualValues(t, 2, read.runs.Load())
			assert.Equal(t, 2, st.Calls)
			assert.Zero(t, st.Denied+st.Errors)
		})
	}
}

func TestApprovalDenialIsCountedAsDeniedInBothModes(t *testing.T) {
	for _, mode := range approvalModes {
		t.Run(mode.name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.cfg.PollInterval = time.Millisecond
			p := newPrompter(approval.Deny)
			gateRead(t, h, p)

			st := mode.run(t, h)
			for id := int64(1); id <= 2; id++ {
				assert.Equal(t, response{ID: id, Error: "approval denied for 'read'"}, h.mustResponse(id))
			}
			assert.EqualValues(t, 2, p.count.Load(), "a denial stores nothing")
			assert.Zero(t, read.runs.Load())
			assert.Equal(t, 2, st.Calls)
			assert.Equal(t, 2, st.Denied)
			assert.Zero(t, st.Errors)
			assert.False(t, st.AccountingLoss)
		})
	}
}
