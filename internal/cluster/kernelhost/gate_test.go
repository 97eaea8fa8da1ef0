package kernelhost

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/tools"
)

// wireGate answers with a fixed answer, after a trip through the wire's
// encoding both ways, and records what it was sent.
type wireGate struct {
	answer *wire.ToolAnswer
	got    *wire.ToolCall
}

func (g *wireGate) Run(_ context.Context, c *wire.ToolCall) *wire.ToolAnswer {
	g.got = decoded(c)
	if g.answer == nil {
		return nil
	}
	return decoded(g.answer)
}

func decoded[T any](v *T) *T {
	env, err := wire.Encode(v, "k1", 1)
	if err != nil {
		panic(err)
	}
	out, err := wire.Decode(env)
	if err != nil {
		panic(err)
	}
	return out.(*T)
}

func TestPumpGateCarriesTheCallAndTheAnswerUnchanged(t *testing.T) {
	g := &wireGate{answer: &wire.ToolAnswer{OK: true, Text: `{"a": 1}`, JSON: true, Untrusted: true}}
	call := pump.Call{ID: 7, Tool: "read", Params: map[string]any{"path": "x", "n": 2.5}, ApprovalID: "appr_1", Gated: true}
	a := PumpGate(g).Run(context.Background(), call)
	assert.Equal(t, pump.Answer{OK: true, Text: `{"a": 1}`, JSON: true, Untrusted: true}, a)
	assert.Equal(t, &wire.ToolCall{ID: 7, Tool: "read", Params: map[string]any{"path": "x", "n": 2.5}, ApprovalID: "appr_1", Gated: true}, g.got)
}

// The session side is the node's authority, but its answers are still
// only what the shim can take: JSON that parses, and an answer at all.
func TestPumpGateRefusesAnswersTheShimCouldNotTake(t *testing.T) {
	for name, tc := range map[string]struct {
		answer *wire.ToolAnswer
		want   pump.Answer
	}{
		"json that does not parse": {&wire.ToolAnswer{OK: true, JSON: true, Text: `{"a":`}, pump.Answer{Text: msgBadJSON}},
		"no answer":                {nil, pump.Answer{Text: msgNoAnswer}},
		"blocked":                  {&wire.ToolAnswer{Blocked: true, Text: "approval denied for 'ls'"}, pump.Answer{Blocked: true, Text: "approval denied for 'ls'"}},
		"ok and blocked":           {&wire.ToolAnswer{OK: true, Blocked: true, Text: "x"}, pump.Answer{OK: true, Text: "x"}},
		"json on an error":         {&wire.ToolAnswer{JSON: true, Text: "no such file"}, pump.Answer{Text: "no such file"}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, PumpGate(&wireGate{answer: tc.answer}).Run(context.Background(), pump.Call{ID: 1, Tool: "read"}))
		})
	}
}

// chanSender is a Sender whose answers the test gives.
type chanSender struct {
	wireGate
	sent  []int64
	reply chan *wire.ToolAnswer
}

func (s *chanSender) Send(_ context.Context, c *wire.ToolCall) <-chan *wire.ToolAnswer {
	s.sent = append(s.sent, c.ID)
	return s.reply
}

func TestPumpGateOfASenderIsASenderAndLetsGoWithTheSweep(t *testing.T) {
	s := &chanSender{reply: make(chan *wire.ToolAnswer, 1)}
	g, ok := PumpGate(s).(pump.Sender)
	require.True(t, ok)
	s.reply <- &wire.ToolAnswer{OK: true, Text: "one"}
	assert.Equal(t, pump.Answer{OK: true, Text: "one"}, <-g.Send(context.Background(), pump.Call{ID: 1, Tool: "read"}))

	// An answer that never comes: the sweep's end releases the wait (the
	// test's leak check proves it).
	sweep, end := context.WithCancel(context.Background())
	_ = g.Send(sweep, pump.Call{ID: 2, Tool: "read"})
	end()
	assert.Equal(t, []int64{1, 2}, s.sent)
	_, plain := PumpGate(&wireGate{}).(pump.Sender)
	assert.False(t, plain)
}

func TestSessionGateRunsWireCallsThroughTheGuard(t *testing.T) {
	read := readTool{}
	cfg := pump.Config{Tools: map[string]tools.Tool{"read": read}, MaxCalls: 1, MaxResultBytes: 100}
	g := SessionGate(pump.NewGuardedGate(cfg))
	ctx := context.Background()
	call := decoded(&wire.ToolCall{ID: 1, Tool: "read", Params: map[string]any{"path": "x"}})
	assert.Equal(t, &wire.ToolAnswer{OK: true, Text: "read x"}, g.Admit(call)(ctx))
	assert.Equal(t, &wire.ToolAnswer{Text: "rpc request already processed"}, g.Run(ctx, call))
	assert.Equal(t, &wire.ToolAnswer{Text: "rpc call limit exceeded (max 1 calls per script)"}, g.Run(ctx, &wire.ToolCall{ID: 2, Tool: "read"}))
}

type readTool struct{}

func (readTool) Name() string { return "read" }
func (readTool) Execute(_ context.Context, p map[string]any) (tools.Result, error) {
	return tools.TextResult("read " + p["path"].(string)), nil
}
