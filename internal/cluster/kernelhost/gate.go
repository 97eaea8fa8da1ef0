package kernelhost

import (
	"context"
	"encoding/json"

	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/pump"
)

// The adapters between the pump's gate and the wire (docs/cluster.md,
// Cell): on the node, PumpGate is the gate the kernel's pump dispatches
// to, forwarding each claimed call through the kernel actor; on the
// session side, SessionGate is the gate the cell's bridge runs each
// forwarded call through, a pump.GuardedGate.

// Sender is a Gate that can send a call without waiting for its answer;
// the kernel actor's gate is one.
type Sender interface {
	Gate
	// Send sends call and returns where its one answer arrives.
	Send(ctx context.Context, call *wire.ToolCall) <-chan *wire.ToolAnswer
}

// Admitter is a Gate that decides a call when it arrives and runs it
// later: the cell bridge admits the calls in the order its mailbox has
// them, which is the order the node sent them, and the guard settles
// answers in that order, as a local pump settles them in claim order.
type Admitter interface {
	Gate
	// Admit decides call without waiting; the function, called once,
	// runs it under the cell's ctx and gives its answer.
	Admit(call *wire.ToolCall) func(ctx context.Context) *wire.ToolAnswer
}

// msgBadJSON answers a call whose answer says JSON and is not: the shim
// would fail to decode it.
const msgBadJSON = "execute_code: the session side's answer is not valid JSON"

// PumpGate is the gate a node's pump dispatches each claimed call to
// (pump.Config.Gate): the call goes to g as a ToolCall and g's answer
// comes back as the pump's. When g is a Sender (the kernel actor's gate
// is), the result is a pump.Sender, so each wave's calls leave the node in
// claim order.
func PumpGate(g Gate) pump.Gate {
	if s, ok := g.(Sender); ok {
		return nodeSender{nodeGate{g}, s}
	}
	return nodeGate{g}
}

type nodeGate struct{ g Gate }

func (n nodeGate) Run(ctx context.Context, c pump.Call) pump.Answer {
	return answerOf(n.g.Run(ctx, toolCallOf(c)))
}

type nodeSender struct {
	nodeGate
	s Sender
}

func (n nodeSender) Send(ctx context.Context, c pump.Call) <-chan pump.Answer {
	sent := n.s.Send(ctx, toolCallOf(c))
	out := make(chan pump.Answer, 1)
	go func() {
		// ctx is the sweep's, which ends with the sweep: nobody waits for
		// an answer after that.
		select {
		case a := <-sent:
			out <- answerOf(a)
		case <-ctx.Done():
		}
	}()
	return out
}

// SessionGate runs a remote cell's calls through guard, on the session
// side: what the cell's bridge is given (placement.Cell.Gate).
func SessionGate(guard *pump.GuardedGate) Admitter { return sessionGate{guard} }

type sessionGate struct{ g *pump.GuardedGate }

func (s sessionGate) Admit(call *wire.ToolCall) func(context.Context) *wire.ToolAnswer {
	run := s.g.Admit(callOf(call))
	return func(ctx context.Context) *wire.ToolAnswer { return toolAnswerOf(run(ctx)) }
}

func (s sessionGate) Run(ctx context.Context, call *wire.ToolCall) *wire.ToolAnswer {
	return s.Admit(call)(ctx)
}

func toolCallOf(c pump.Call) *wire.ToolCall {
	return &wire.ToolCall{ID: c.ID, Tool: c.Tool, Params: c.Params, ApprovalID: c.ApprovalID, Gated: c.Gated}
}

func callOf(c *wire.ToolCall) pump.Call {
	return pump.Call{ID: c.ID, Tool: c.Tool, Params: c.Params, ApprovalID: c.ApprovalID, Gated: c.Gated}
}

func toolAnswerOf(a pump.Answer) *wire.ToolAnswer {
	return &wire.ToolAnswer{OK: a.OK, Text: a.Text, JSON: a.JSON, Untrusted: a.Untrusted, Blocked: a.Blocked}
}

// answerOf is a session side's answer as the node's pump takes it: JSON
// only for a content that parses, a missing answer a failed call.
func answerOf(a *wire.ToolAnswer) pump.Answer {
	switch {
	case a == nil:
		return pump.Answer{Text: msgNoAnswer}
	case a.OK && a.JSON && !json.Valid([]byte(a.Text)):
		return pump.Answer{Text: msgBadJSON}
	case a.OK:
		return pump.Answer{OK: true, Text: a.Text, JSON: a.JSON, Untrusted: a.Untrusted}
	}
	return pump.Answer{Text: a.Text, Untrusted: a.Untrusted, Blocked: a.Blocked}
}

// msgNoAnswer answers a call whose gate gave no answer at all.
const msgNoAnswer = "execute_code: the call got no answer"
