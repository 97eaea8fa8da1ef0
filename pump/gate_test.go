package pump

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/internal/shimtest"
	"github.com/executecode/executecode/tools"
)

// wireGate stands for the network between a kernel node's pump and the
// session side: each call and answer crosses as JSON (the wire's
// payloads are JSON, so params come back as a tool sees them locally),
// calls arrive in the order the node sends them and are admitted in that
// order, as the cell bridge's mailbox admits them, each runs under the
// cell's context, and the node stops waiting when its sweep ends.
type wireGate struct {
	session *GuardedGate
	cell    context.Context
}

func (w wireGate) Send(ctx context.Context, c Call) <-chan Answer {
	var sent Call
	mustRoundTrip(c, &sent)
	run := w.session.Admit(sent)
	reply := make(chan Answer, 1)
	go func() {
		a := run(w.cell)
		var got Answer
		mustRoundTrip(a, &got)
		reply <- got
	}()
	return reply
}

func (w wireGate) Run(ctx context.Context, c Call) Answer {
	select {
	case a := <-w.Send(ctx, c):
		return a
	case <-ctx.Done():
		return Answer{Text: "the call was cancelled"}
	}
}

func mustRoundTrip(in, out any) {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(err)
	}
}

// shimCell is one script run by the rendered shim against a session
// cell's server, with real bells and the token socket: the cell's
// output, its stats and what the observers saw.
type shimCell struct {
	out        string
	stats      Stats
	notified   []string
	roundTrips []RoundTrip
}

// runShimCell runs script with helpers rendered, through a server of cfg
// (its Dir, Token and Bells are made here), and waits for python.
func runShimCell(t *testing.T, script string, helpers []string, cfg Config) shimCell {
	t.Helper()
	token, err := NewToken()
	require.NoError(t, err)
	staged := shimtest.Stage(t, t.TempDir(), token, script, helpers)
	cfg.Dir, cfg.Token, cfg.Bells = staged.Dir, token, staged.Bells
	cfg.PollInterval = time.Hour // progress only through the doorbells

	var mu sync.Mutex
	var cell shimCell
	cfg.OnNotify = func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		cell.notified = append(cell.notified, msg)
	}
	cfg.OnRoundTrip = func(rt RoundTrip) {
		mu.Lock()
		defer mu.Unlock()
		cell.roundTrips = append(cell.roundTrips, rt)
	}

	srv, err := StartServer(cfg)
	require.NoError(t, err)
	defer srv.Stop(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := staged.Start(ctx, t, proctest.Python(t), &stdout, &stderr)
	require.NoError(t, cmd.Wait(), "python stderr: %s", stderr.String())

	cell.stats, err = srv.Finish(ctx)
	require.NoError(t, err)
	cell.out = strings.TrimSpace(stdout.String())
	mu.Lock()
	defer mu.Unlock()
	return cell
}

// equivalenceScript makes every kind of call a cell can make, one after
// the other, and prints what each gave: content, JSON, tool errors
// (trusted or not, with bytes that are not UTF-8), a panic, approvals
// granted and denied, a policy denial, a helper the host lacks, the
// result-byte budget broken and then respected, a batch, a notify() and
// a text(), and calls until the call budget refuses them.
const equivalenceScript = `
import json
out = []
def attempt(f, *a):
    try:
        out.append(["ok", f(*a)])
    except ToolError as e:
        out.append(["error", str(e)])
for path in ["hello \u00e9\U0001f600", "json", "badjson", "fail", "untrusted-fail", "bad-utf8-fail",
             "panic", "bad-utf8", "untrusted", "big", "small"]:
    attempt(read, path)
attempt(ls, "approve-me")
attempt(ls, "deny-me")
attempt(grep, "pattern")
attempt(find, "pattern")
attempt(batch, [("read", {"path": "a"}), ("read", {"path": "bb"}), ("ls", {"path": "approve-me"})])
notify("halfway")
text("a block")
for i in range(8):
    attempt(read, "n%d" % i)
print(json.dumps(out))
`

// equivalenceTools are the host's side of equivalenceScript: read answers
// by path, ls echoes, grep exists but the policy denies it, find is
// missing.
func equivalenceTools() map[string]tools.Tool {
	read := &funcTool{name: "read", fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		path, _ := p["path"].(string)
		switch path {
		case "json":
			return tools.Result{Content: []tools.Content{{Type: tools.TypeJSON, Text: `{"a": [1, 2.5, "\u00e9"], "b": null}`}}}, nil
		case "badjson":
			return tools.Result{Content: []tools.Content{{Type: tools.TypeJSON, Text: `{"a": `}}}, nil
		case "fail":
			return tools.Result{}, errors.New("no such file: fail")
		case "untrusted-fail":
			return tools.Result{}, &tools.UntrustedError{Err: errors.New("the server says no")}
		case "bad-utf8-fail":
			return tools.Result{}, errors.New("bad \xff\xfe bytes")
		case "panic":
			panic("the tool fell over")
		case "bad-utf8":
			return tools.TextResult("ok \xff"), nil
		case "untrusted":
			r := tools.TextResult("from outside")
			r.Untrusted = true
			return r, nil
		case "big":
			return tools.TextResult(strings.Repeat("x", 500)), nil
		}
		return tools.TextResult("read " + path), nil
	}}
	return map[string]tools.Tool{"read": read, "ls": echoPath("ls"), "grep": echoPath("grep")}
}

func echoPath(name string) *funcTool {
	return &funcTool{name: name, fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		path, _ := p["path"].(string)
		if path == "" {
			path, _ = p["pattern"].(string)
		}
		return tools.TextResult(name + " " + path), nil
	}}
}

// promptLog is a host's Approver that approves "approve-me" and denies the
// rest, recording every prompt.
type promptLog struct {
	mu      sync.Mutex
	prompts []approval.Request
}

func (p *promptLog) Decide(_ context.Context, req approval.Request) (approval.Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prompts = append(p.prompts, req)
	if req.Args["path"] == "approve-me" {
		return approval.ApproveOnce, nil
	}
	return approval.Deny, nil
}

// shown is every prompt without its id, which is fresh for every call.
func (p *promptLog) shown(t *testing.T) []approval.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]approval.Request, len(p.prompts))
	for i, r := range p.prompts {
		assert.True(t, strings.HasPrefix(r.ID, "appr_"), "prompt id %q", r.ID)
		r.ID = ""
		out[i] = r
	}
	return out
}

// sessionConfig is what both the local pump and the session side of a
// remote cell are given: one policy, one approval context, one set of
// budgets.
func sessionConfig(t *testing.T, p *promptLog) Config {
	return Config{
		Tools:          equivalenceTools(),
		MaxCalls:       22,
		MaxResultBytes: 104,
		MaxParallel:    3,
		Policy:         tools.Policy{Deny: []string{"grep"}, RequireApproval: []string{"ls"}},
		Approvals:      startBroker(t, p),
		ApprovalContext: ApprovalContext{
			SessionID: "sess-1", AgentID: "agent-1", Timeout: time.Minute,
		},
	}
}

var equivalenceHelpers = []string{tools.Read, tools.Grep, tools.Find, tools.Ls}

func outcomes(rts []RoundTrip) []string {
	out := make([]string, len(rts))
	for i, rt := range rts {
		out[i] = rt.Tool + ":" + string(rt.Outcome)
	}
	sort.Strings(out)
	return out
}

// A script sees the same answers, errors, budgets, approvals and stats
// whether its calls run through the local gate or are claimed by a
// node's pump and forwarded, over a JSON wire, to a GuardedGate around
// the local gate on the session side.
func TestAForwardedGuardedGateAnswersExactlyAsTheLocalGate(t *testing.T) {
	localPrompts := &promptLog{}
	local := runShimCell(t, equivalenceScript, equivalenceHelpers, sessionConfig(t, localPrompts))

	remotePrompts := &promptLog{}
	session := sessionConfig(t, remotePrompts)
	var sessionTrips []RoundTrip
	var tripsMu sync.Mutex
	session.OnRoundTrip = func(rt RoundTrip) {
		tripsMu.Lock()
		defer tripsMu.Unlock()
		sessionTrips = append(sessionTrips, rt)
	}
	guard := NewGuardedGate(session)
	cellCtx, endCell := context.WithCancel(context.Background())
	defer endCell()
	// The node: the cell's policy and budgets, no tools and no broker of
	// its own, every claimed call forwarded.
	node := Config{
		Gate:           wireGate{session: guard, cell: cellCtx},
		Available:      []string{tools.Read, tools.Grep, tools.Ls},
		MaxCalls:       session.MaxCalls,
		MaxResultBytes: session.MaxResultBytes,
		MaxParallel:    session.MaxParallel,
		Policy:         session.Policy,
	}
	remote := runShimCell(t, equivalenceScript, equivalenceHelpers, node)

	var answers [][]any
	require.NoError(t, json.Unmarshal([]byte(local.out), &answers), local.out)
	require.Len(t, answers, 24)
	assert.Equal(t, []any{"ok", "read hello é😀"}, answers[0])
	assert.Equal(t, []any{"ok", map[string]any{"a": []any{1.0, 2.5, "é"}, "b": nil}}, answers[1])
	assert.Equal(t, []any{"error", "tool 'read' returned a JSON result that does not parse"}, answers[2])
	assert.Equal(t, []any{"error", "bad \ufffd\ufffd bytes"}, answers[5])
	assert.Equal(t, []any{"error", "the tool fell over"}, answers[6])
	assert.Equal(t, []any{"error", "rpc result byte budget exceeded (result 500 bytes, 33 bytes remaining of 104)"}, answers[9])
	assert.Equal(t, []any{"ok", "read small"}, answers[10])
	assert.Equal(t, []any{"ok", "ls approve-me"}, answers[11])
	assert.Equal(t, []any{"error", "approval denied for 'ls'"}, answers[12])
	assert.Equal(t, []any{"error", "Tool 'grep' is in deny list"}, answers[13])
	assert.Equal(t, []any{"error", "tool 'find' is not available inside execute_code scripts"}, answers[14])
	// The batch crosses the budget: its second call is the first refused,
	// as a local pump spends the budget in claim order.
	assert.Equal(t, []any{"error", "rpc result byte budget exceeded (result 7 bytes, 4 bytes remaining of 104)"}, answers[15])
	assert.Equal(t, []any{"error", "rpc call limit exceeded (max 22 calls per script)"}, answers[23])

	assert.Equal(t, local.out, remote.out, "the script's every answer and error")
	assert.Equal(t, local.stats, remote.stats, "the node's pump counts what the local pump counts")
	assert.Equal(t, []string{"halfway"}, local.notified)
	assert.Equal(t, local.notified, remote.notified)
	assert.Equal(t, localPrompts.shown(t), remotePrompts.shown(t), "the same prompts, with the session's ids")
	assert.Len(t, localPrompts.shown(t), 3)
	assert.Equal(t, outcomes(local.roundTrips), outcomes(remote.roundTrips))
	tripsMu.Lock()
	assert.Equal(t, outcomes(local.roundTrips), outcomes(sessionTrips), "the session side observes every call it ran")
	tripsMu.Unlock()

	// The guard saw every call the node did not refuse itself: all but
	// the policy's denial, the missing helper and the four past the call
	// budget.
	g := guard.Stats()
	assert.Equal(t, local.stats.Calls-2, g.Calls)
	assert.Equal(t, local.stats.Denied-1, g.Denied)
	assert.Equal(t, local.stats.Errors-5, g.Errors)
	assert.Equal(t, local.stats.Bytes, g.Bytes)
	assert.Equal(t, local.stats.ToolsUsed, g.ToolsUsed)
	assert.Equal(t, local.stats.Untrusted, g.Untrusted)
	assert.Empty(t, guard.Unanswered())
	calls, dropped := guard.Ledger()
	assert.Len(t, calls, g.Calls)
	assert.Zero(t, dropped)
}
