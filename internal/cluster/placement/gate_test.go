package placement

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/internal/shimtest"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/tools"
)

// These tests run a cell's script with the rendered shim against a real
// pump twice: once locally, with the session side's tools, and once on a
// node's kernel whose pump forwards each claimed call through the kernel
// actor, the wire and the cell's bridge to a GuardedGate on the session
// side. The node's kernels here are the test's own (the runtime's Host is
// wired elsewhere): each cell is one python3 process over a fresh bridge.

// shimRun runs script with helpers rendered through a session server of
// cfg (its Dir, Token and Bells are made here) and returns python's output
// and the server's stats.
func shimRun(ctx context.Context, t *testing.T, script string, helpers []string, cfg pump.Config) (string, pump.Stats) {
	t.Helper()
	token, err := pump.NewToken()
	require.NoError(t, err)
	staged := shimtest.Stage(t, t.TempDir(), token, script, helpers)
	cfg.Dir, cfg.Token, cfg.Bells, cfg.PollInterval = staged.Dir, token, staged.Bells, time.Hour

	srv, err := pump.StartServer(cfg)
	require.NoError(t, err)
	defer srv.Stop(context.Background())
	var stdout, stderr bytes.Buffer
	cmd := staged.Start(ctx, t, proctest.Python(t), &stdout, &stderr)
	require.NoError(t, cmd.Wait(), "python stderr: %s", stderr.String())
	stats, err := srv.Finish(ctx)
	require.NoError(t, err)
	return strings.TrimSpace(stdout.String()), stats
}

// pumpHost runs each cell as a script over a pump whose gate is the
// kernel's: what a node's Host does with the gate it is handed.
type pumpHost struct {
	t       *testing.T
	helpers []string
	mu      sync.Mutex
	stats   []pump.Stats
}

func (h *pumpHost) StartKernel(context.Context, string, *wire.StartKernel) (kernelhost.Kernel, error) {
	return pumpKernel{h}, nil
}

type pumpKernel struct{ h *pumpHost }

func (k pumpKernel) Run(ctx context.Context, cell *wire.RunCell, gate kernelhost.Gate, notify func(string)) *wire.CellResult {
	out, stats := shimRun(ctx, k.h.t, cell.Code, k.h.helpers, pump.Config{
		Gate:           kernelhost.PumpGate(gate),
		Available:      cell.Tools,
		Policy:         tools.Policy{Allow: cell.Policy.Allow, Deny: cell.Policy.Deny, RequireApproval: cell.Policy.RequireApproval},
		MaxCalls:       cell.MaxCalls,
		MaxResultBytes: cell.MaxResultBytes,
		MaxParallel:    cell.MaxParallel,
		OnNotify:       notify,
	})
	k.h.mu.Lock()
	k.h.stats = append(k.h.stats, stats)
	k.h.mu.Unlock()
	return &wire.CellResult{RequestID: "r", Output: out, StateRetained: true}
}

func (pumpKernel) Stop(context.Context) {}

const remoteScript = `
import json
out = []
def attempt(f, *a):
    try:
        out.append(["ok", f(*a)])
    except ToolError as e:
        out.append(["error", str(e)])
for path in ["one", "json", "fail", "bad-\xff", "untrusted", "x" * 30]:
    attempt(read, path)
attempt(ls, "approve-me")
attempt(ls, "deny-me")
attempt(grep, "p")
attempt(find, "p")
attempt(batch, [("read", {"path": "aa"}), ("read", {"path": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}), ("read", {"path": "c"})])
notify("halfway")
for i in range(5):
    attempt(read, "n%d" % i)
print(json.dumps(out))
`

func remoteTools() map[string]tools.Tool {
	read := toolFunc(func(_ context.Context, p map[string]any) (tools.Result, error) {
		path, _ := p["path"].(string)
		switch {
		case path == "json":
			return tools.JSONResult(map[string]any{"a": []any{1, "é"}})
		case path == "fail":
			return tools.Result{}, errors.New("no such file: fail")
		case strings.HasPrefix(path, "bad-"):
			return tools.Result{}, errors.New("bad \xff\xfe")
		case path == "untrusted":
			r := tools.TextResult("from outside")
			r.Untrusted = true
			return r, nil
		}
		return tools.TextResult("read " + path), nil
	})
	echo := toolFunc(func(_ context.Context, p map[string]any) (tools.Result, error) {
		return tools.TextResult("echo " + p["path"].(string)), nil
	})
	return map[string]tools.Tool{"read": named{"read", read}, "ls": named{"ls", echo}, "grep": named{"grep", echo}}
}

type toolFunc func(context.Context, map[string]any) (tools.Result, error)

type named struct {
	name string
	fn   toolFunc
}

func (n named) Name() string { return n.name }
func (n named) Execute(ctx context.Context, p map[string]any) (tools.Result, error) {
	return n.fn(ctx, p)
}

// approver approves "approve-me" and denies the rest.
var approver = approval.ApproverFunc(func(_ context.Context, req approval.Request) (approval.Decision, error) {
	if req.Args["path"] == "approve-me" {
		return approval.ApproveOnce, nil
	}
	return approval.Deny, nil
})

func sessionSide(t *testing.T, sys *actor.ActorSystem) pump.Config {
	pid := sys.Root.Spawn(approval.Props(approval.Config{Approver: approver}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return pump.Config{
		Tools: remoteTools(), MaxCalls: 15, MaxResultBytes: 120, MaxParallel: 3,
		Policy:          tools.Policy{Deny: []string{"grep"}, RequireApproval: []string{"ls"}},
		Approvals:       approval.NewBroker(sys.Root, pid),
		ApprovalContext: pump.ApprovalContext{SessionID: "s", AgentID: "a", Timeout: time.Minute},
	}
}

// A cell on a node answers its script exactly as a local cell does: its
// helper calls are claimed by the node's pump, cross the wire through the
// kernel actor and the cell's bridge, and are decided and run by a
// GuardedGate on the session side.
func TestACellOnANodeAnswersItsScriptAsALocalCellDoes(t *testing.T) {
	helpers := []string{tools.Read, tools.Grep, tools.Find, tools.Ls}
	host := &pumpHost{t: t, helpers: helpers}
	h := newHarnessWith(t, 1, 0, host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	local, localStats := shimRun(ctx, t, remoteScript, helpers, sessionSide(t, h.sys))

	session := sessionSide(t, h.sys)
	guard := pump.NewGuardedGate(session)
	proxy := h.start(t)
	var notes []string
	res := <-Execute(ctx, h.sys.Root, proxy, Cell{
		Run: wire.RunCell{
			Code: remoteScript, TimeoutMS: 60000,
			Tools:    []string{tools.Read, tools.Grep, tools.Ls},
			Policy:   wire.Policy{Deny: []string{"grep"}, RequireApproval: []string{"ls"}},
			MaxCalls: session.MaxCalls, MaxResultBytes: session.MaxResultBytes, MaxParallel: session.MaxParallel,
		},
		Gate:   kernelhost.SessionGate(guard),
		Notify: func(m string) { notes = append(notes, m) },
	})
	require.NotNil(t, res)

	var answers [][]any
	require.NoError(t, json.Unmarshal([]byte(local), &answers), local)
	require.Len(t, answers, 16)
	assert.Equal(t, []any{"error", "bad \ufffd\ufffd"}, answers[3])
	assert.Equal(t, []any{"ok", "echo approve-me"}, answers[6])
	assert.Equal(t, []any{"error", "approval denied for 'ls'"}, answers[7])
	assert.Equal(t, []any{"error", "Tool 'grep' is in deny list"}, answers[8])
	assert.Equal(t, []any{"error", "tool 'find' is not available inside execute_code scripts"}, answers[9])
	assert.Contains(t, answers[10][1], "rpc result byte budget exceeded (result 43 bytes")
	assert.Equal(t, []any{"error", "rpc call limit exceeded (max 15 calls per script)"}, answers[15])

	assert.Equal(t, local, res.Output, "every answer and error of the script")
	require.Len(t, host.stats, 1)
	assert.Equal(t, localStats, host.stats[0], "the node's pump counts what a local pump counts")
	assert.Equal(t, []string{"halfway"}, notes)
	g := guard.Stats()
	assert.Equal(t, localStats.Bytes, g.Bytes)
	assert.Equal(t, localStats.ToolsUsed, g.ToolsUsed)
	assert.Equal(t, localStats.Untrusted, g.Untrusted)
	assert.Equal(t, localStats.Calls-2, g.Calls, "all but the denial and the missing helper, which the node refused")
	assert.Empty(t, guard.Unanswered())
}

// A node that replays an id its bridge answered, or claims a tool the
// cell may not call, gets the local pump's refusals through the bridge,
// and no tool runs for it.
func TestAHostileNodeGetsTheLocalRefusalsThroughTheBridge(t *testing.T) {
	h := newHarness(t, 1, 0)
	kernel := newAnswerProbe(h.sys)
	defer h.sys.Root.Stop(kernel.pid)
	var runs sync.Map
	count := func(name string) named {
		return named{name, func(_ context.Context, p map[string]any) (tools.Result, error) {
			n, _ := runs.LoadOrStore(name, new(int))
			*n.(*int)++
			return tools.TextResult("ran " + name), nil
		}}
	}
	cfg := pump.Config{Tools: map[string]tools.Tool{"read": count("read"), "grep": count("grep")}, MaxCalls: 2, MaxResultBytes: 100,
		Policy: tools.Policy{Deny: []string{"grep"}}}
	guard := pump.NewGuardedGate(cfg)
	b := &bridge{gate: kernelhost.SessionGate(guard), kernel: kernel.pid, incarnation: "k1", log: h.cluster.cfg.Logger}
	pid := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return b }))
	defer func() { _ = h.sys.Root.StopFuture(pid).Wait() }()

	for seq, call := range []*wire.ToolCall{
		{ID: 1, Tool: "read", Params: map[string]any{"path": "a"}},
		{ID: 1, Tool: "read", Params: map[string]any{"path": "a"}},
		{ID: 2, Tool: "grep", Gated: true},
		{ID: 3, Tool: "read"},
	} {
		env, err := wire.Encode(call, "k1", uint64(seq+1))
		require.NoError(t, err)
		kernel.send(t, pid, env)
		kernel.answer(t)
	}
	assert.Equal(t, []*wire.ToolAnswer{
		{OK: true, Text: "ran read"},
		{Text: "rpc request already processed"},
		{Text: "Tool 'grep' is in deny list"},
		{Text: "rpc call limit exceeded (max 2 calls per script)"},
	}, kernel.answers)
	n, _ := runs.Load("read")
	assert.Equal(t, 1, *n.(*int))
	_, grepRan := runs.Load("grep")
	assert.False(t, grepRan)
}

// answerProbe stands for a node's kernel: it keeps the answers its
// bridge sends it.
type answerProbe struct {
	pid     *actor.PID
	root    *actor.RootContext
	got     chan *wire.ToolAnswer
	answers []*wire.ToolAnswer
}

func newAnswerProbe(sys *actor.ActorSystem) *answerProbe {
	p := &answerProbe{root: sys.Root, got: make(chan *wire.ToolAnswer, 8)}
	p.pid = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if env, ok := ctx.Message().(*wire.Envelope); ok {
			if v, err := wire.Decode(env); err == nil {
				if a, ok := v.(*wire.ToolAnswer); ok {
					p.got <- a
				}
			}
		}
	}))
	return p
}

func (p *answerProbe) send(t *testing.T, to *actor.PID, env *wire.Envelope) {
	t.Helper()
	p.root.RequestWithCustomSender(to, env, p.pid)
}

func (p *answerProbe) answer(t *testing.T) *wire.ToolAnswer {
	t.Helper()
	select {
	case a := <-p.got:
		p.answers = append(p.answers, a)
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}
