package approval

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted answers each prompt with the decision set for its id, and
// denies the rest.
type scripted struct {
	mu      sync.Mutex
	answers map[string]Decision
}

func (s *scripted) Decide(_ context.Context, req Request) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.answers[req.ID]; ok {
		return d, nil
	}
	return Deny, nil
}

func (s *scripted) answer(id string, d Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[id] = d
}

func newScripted() *scripted { return &scripted{answers: map[string]Decision{}} }

func TestDecisionsAnswerLaterCallsOnlyWithinTheirScope(t *testing.T) {
	type probe struct {
		name string
		req  Request
	}
	probes := []probe{
		{"same session", webfetch("", "a", "s1", "a1")},
		{"same agent, other session", webfetch("", "a", "s2", "a1")},
		{"other agent and session", webfetch("", "a", "s3", "a2")},
		{"same session, other args", webfetch("", "b", "s1", "a1")},
		{"same session, other tool", Request{Tool: "read", Args: map[string]any{"url": "a"}, SessionID: "s1", AgentID: "a1"}},
	}
	tests := []struct {
		d Decision
		// answered maps a probe to the scope that answers it; a probe
		// that is absent is prompted.
		answered map[string]Decision
	}{
		{ApproveOnce, nil},
		{Deny, nil},
		{ApproveSession, map[string]Decision{"same session": ApproveSession}},
		{ApproveAgent, map[string]Decision{"same session": ApproveAgent, "same agent, other session": ApproveAgent}},
		{ApproveGlobal, map[string]Decision{
			"same session": ApproveGlobal, "same agent, other session": ApproveGlobal, "other agent and session": ApproveGlobal,
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.d), func(t *testing.T) {
			s := newScripted()
			h := newHarness(t, Config{Approver: s})
			first := webfetch(NewID(), "a", "s1", "a1")
			s.answer(first.ID, tt.d)
			out, err := h.b.Request(context.Background(), first)
			require.NoError(t, err)
			require.Equal(t, tt.d, out.Scope)

			for _, p := range probes {
				prompted, scope := h.probe(p.req)
				want, stored := tt.answered[p.name]
				if assert.Equal(t, !stored, prompted, p.name) && stored {
					assert.Equal(t, want, scope, p.name)
				}
			}
		})
	}
}

func TestStoredApprovalsAnswerGlobalBeforeAgentBeforeSession(t *testing.T) {
	s := newScripted()
	h := newHarness(t, Config{Approver: s})
	approve := func(req Request, d Decision) {
		t.Helper()
		req.ID = NewID()
		s.answer(req.ID, d)
		out, err := h.b.Request(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, Outcome{Approved: true, Scope: d}, out)
	}

	approve(webfetch("", "x", "s1", "a1"), ApproveSession)
	_, scope := h.probe(webfetch("", "x", "s1", "a1"))
	assert.Equal(t, ApproveSession, scope)

	approve(webfetch("", "x", "s2", "a1"), ApproveAgent)
	_, scope = h.probe(webfetch("", "x", "s1", "a1"))
	assert.Equal(t, ApproveAgent, scope, "agent before session")

	approve(webfetch("", "x", "s3", "a2"), ApproveGlobal)
	_, scope = h.probe(webfetch("", "x", "s1", "a1"))
	assert.Equal(t, ApproveGlobal, scope, "global before agent")
}

func TestStoredAnswerRegistersNoPrompt(t *testing.T) {
	s := newScripted()
	h := newHarness(t, Config{Approver: s})
	first := webfetch(NewID(), "a", "s1", "a1")
	s.answer(first.ID, ApproveSession)
	_, err := h.b.Request(context.Background(), first)
	require.NoError(t, err)
	before := len(h.rec.Events())

	out, err := h.b.Request(context.Background(), webfetch(NewID(), "a", "s1", "a1"))

	require.NoError(t, err)
	assert.Equal(t, Outcome{Approved: true, Scope: ApproveSession}, out)
	assert.Len(t, h.rec.Events(), before, "no prompt, no event")
	assert.Equal(t, 0, h.b.Pending())
}

func TestExactApprovalMatchesEqualArgumentsHoweverBuilt(t *testing.T) {
	s := newScripted()
	h := newHarness(t, Config{Approver: s})
	first := Request{ID: NewID(), Tool: "grep", SessionID: "s", AgentID: "a", Args: map[string]any{
		"pattern": "x", "opts": map[string]any{"n": 1, "glob": []any{"*.go", "*.md"}},
	}}
	s.answer(first.ID, ApproveSession)
	_, err := h.b.Request(context.Background(), first)
	require.NoError(t, err)

	same := map[string]any{"opts": map[string]any{"glob": []any{"*.go", "*.md"}, "n": 1.0}, "pattern": "x"}
	assert.False(t, h.prompts(Request{Tool: "grep", SessionID: "s", Args: same}), "equal arguments, built differently")
	for name, args := range map[string]map[string]any{
		"other value":       {"pattern": "y", "opts": map[string]any{"n": 1, "glob": []any{"*.go", "*.md"}}},
		"other list order":  {"pattern": "x", "opts": map[string]any{"n": 1, "glob": []any{"*.md", "*.go"}}},
		"one more argument": {"pattern": "x", "opts": map[string]any{"n": 1, "glob": []any{"*.go", "*.md"}}, "path": "."},
		"no arguments":      nil,
	} {
		assert.True(t, h.prompts(Request{Tool: "grep", SessionID: "s", Args: args}), name)
	}
}

func TestNilAndEmptyArgumentsAreTheSameCall(t *testing.T) {
	s := newScripted()
	h := newHarness(t, Config{Approver: s})
	first := Request{ID: NewID(), Tool: "ls", SessionID: "s"}
	s.answer(first.ID, ApproveSession)
	_, err := h.b.Request(context.Background(), first)
	require.NoError(t, err)

	assert.False(t, h.prompts(Request{Tool: "ls", SessionID: "s", Args: map[string]any{}}))
}

func TestSessionOrAgentApprovalWithoutItsOwnerStoresNothing(t *testing.T) {
	for _, d := range []Decision{ApproveSession, ApproveAgent} {
		t.Run(string(d), func(t *testing.T) {
			s := newScripted()
			h := newHarness(t, Config{Approver: s})
			first := webfetch(NewID(), "a", "", "")
			s.answer(first.ID, d)
			out, err := h.b.Request(context.Background(), first)
			require.NoError(t, err)
			assert.Equal(t, Outcome{Approved: true, Scope: d}, out, "this call is approved")

			assert.True(t, h.prompts(webfetch("", "a", "", "")), "a caller without session or agent is not covered")
		})
	}
}

func TestGrantsApproveAToolWithAnyArguments(t *testing.T) {
	h := newHarness(t, Config{Grants: []Grant{
		{Tool: "webfetch", Scope: ApproveSession, Owner: "s1"},
		{Tool: "grep", Scope: ApproveAgent, Owner: "a1"},
		{Tool: "read", Scope: ApproveGlobal, Owner: "ignored for global"},
		// Ignored: no such standing scope, or no owner.
		{Tool: "ls", Scope: ApproveOnce},
		{Tool: "ls", Scope: Deny},
		{Tool: "find", Scope: ApproveSession},
		{Tool: "find", Scope: ApproveAgent},
		{Scope: ApproveGlobal},
	}})
	req := func(tool, session, agent string, args map[string]any) Request {
		return Request{Tool: tool, SessionID: session, AgentID: agent, Args: args}
	}
	tests := []struct {
		name string
		req  Request
		want Decision // "" = prompted
	}{
		{"session grant, any args", req("webfetch", "s1", "a9", map[string]any{"url": "whatever"}), ApproveSession},
		{"session grant, no args", req("webfetch", "s1", "", nil), ApproveSession},
		{"session grant, other session", req("webfetch", "s2", "a1", nil), ""},
		{"agent grant", req("grep", "s9", "a1", map[string]any{"pattern": "p"}), ApproveAgent},
		{"agent grant, other agent", req("grep", "s9", "a2", nil), ""},
		{"global grant", req("read", "", "", map[string]any{"path": "x"}), ApproveGlobal},
		{"once grant ignored", req("ls", "s1", "a1", nil), ""},
		{"ownerless grants ignored", req("find", "", "", nil), ""},
	}
	for _, tt := range tests {
		prompted, scope := h.probe(tt.req)
		assert.Equal(t, tt.want == "", prompted, tt.name)
		assert.Equal(t, tt.want, scope, tt.name)
	}
}

func TestExactApprovalIsFoundBeforeTheGrantOfALowerScope(t *testing.T) {
	s := newScripted()
	h := newHarness(t, Config{Approver: s, Grants: []Grant{{Tool: "webfetch", Scope: ApproveSession, Owner: "s1"}}})
	first := webfetch(NewID(), "a", "s2", "a1")
	s.answer(first.ID, ApproveAgent)
	_, err := h.b.Request(context.Background(), first)
	require.NoError(t, err)

	_, scope := h.probe(webfetch("", "a", "s1", "a1"))
	assert.Equal(t, ApproveAgent, scope, "the agent's exact approval outranks the session's tool-wide grant")
	_, scope = h.probe(webfetch("", "b", "s1", "a1"))
	assert.Equal(t, ApproveSession, scope, "other arguments fall to the grant")
}
