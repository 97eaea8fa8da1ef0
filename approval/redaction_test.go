package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

// syncBuffer is a log sink the broker and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestEventsAndLogsCarryNoIdentities(t *testing.T) {
	const (
		session = "session-7f3a"
		agent   = "agent-91bc"
		url     = "https://secret.example/token=abc"
		failure = "host prompt leaked-detail"
		reason  = "reason-text-1234"
		owner   = "grant-owner-55"
	)
	logs := &syncBuffer{}
	logger := zerolog.New(logs).Level(zerolog.DebugLevel)
	h := newHarness(t, Config{
		Logger: &logger,
		Grants: []Grant{{Tool: "grep", Scope: ApproveSession, Owner: owner}, {Tool: "x", Scope: ApproveOnce, Owner: owner}},
		Approver: ApproverFunc(func(ctx context.Context, req Request) (Decision, error) {
			switch req.Tool {
			case "read":
				return "", errors.New(failure)
			case "webfetch":
				return ApproveSession, nil
			}
			<-ctx.Done()
			return "", ctx.Err()
		}),
	})
	ids := []string{NewID(), NewID(), NewID()}
	_, err := h.b.Request(context.Background(), Request{ID: ids[0], Tool: "webfetch", Args: map[string]any{"url": url},
		SessionID: session, AgentID: agent, Rationale: "Tool execution: webfetch"})
	require.NoError(t, err)
	_, err = h.b.Request(context.Background(), Request{ID: ids[1], Tool: "read", SessionID: session, AgentID: agent})
	require.ErrorIs(t, err, ErrApproverFailed)
	res := h.request(context.Background(), Request{ID: ids[2], Tool: "custom_tool_" + session, SessionID: session})
	h.waitPending(1)
	require.NoError(t, h.b.Cancel(ids[2], reason))
	h.outcome(res)

	var sink bytes.Buffer
	out := zerolog.New(&sink)
	events := h.rec.Events()
	require.Len(t, events, 6)
	for _, e := range events {
		sink.Reset()
		out.Log().EmbedObject(e).Send()
		var fields map[string]any
		require.NoError(t, json.Unmarshal(sink.Bytes(), &fields))
		for k := range fields {
			assert.Contains(t, []string{"count", "tool", "decision"}, k, "%s: field %s", e.Name(), k)
		}
		assert.EqualValues(t, 1, fields["count"])
	}
	assert.Equal(t, []telemetry.ApprovalDecision{
		telemetry.ApprovalApproveSession, telemetry.ApprovalFailed, telemetry.ApprovalCancelled,
	}, h.decisions())
	last := events[len(events)-1].(telemetry.ApprovalResolved)
	assert.Equal(t, telemetry.ApprovalToolOther, last.Tool, "a tool outside the allowlist is other")

	all := sink.String() + logs.String()
	for _, e := range events {
		sink.Reset()
		out.Log().EmbedObject(e).Send()
		all += sink.String()
	}
	for _, secret := range append([]string{session, agent, url, failure, reason, owner, "secret", "Tool execution"}, ids...) {
		assert.False(t, strings.Contains(all, secret), "%q reached telemetry or logs", secret)
	}
	assert.Contains(t, logs.String(), "approver failed", "the failure is logged, by class only")
	assert.Contains(t, logs.String(), "approval grant ignored")
}
