package placement

import (
	"context"
	"sync/atomic"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// The bridge trusts no node: it keeps the bounds a local pump keeps on
// notify() (docs/protocol.md, Notifications) and bounds the helper calls
// it runs at once, whatever the node sends.
const (
	maxNotifyForwarded = 64
	maxNotifyBytes     = 4096
	maxCallsInFlight   = 64
)

// bridge is a remote cell's session-side end: each ToolCall from the
// cell's kernel runs through the cell's gate here (a pump.GuardedGate,
// through kernelhost.SessionGate, admitted in the order the calls
// arrive), and each notify() goes to the caller. It lives as long as its
// cell; its stop cancels every call still running.
type bridge struct {
	gate        Gate
	notify      func(string)
	kernel      *actor.PID
	incarnation string
	log         *zerolog.Logger
	ctx         context.Context
	cancel      context.CancelFunc
	notified    int
	inFlight    atomic.Int32
}

func (b *bridge) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.ctx, b.cancel = context.WithCancel(context.Background())
	case *actor.Stopping:
		b.cancel()
	case *wire.Envelope:
		b.onEnvelope(ctx, m)
	}
}

func (b *bridge) onEnvelope(ctx actor.Context, env *wire.Envelope) {
	// Only the cell's own kernel speaks to its bridge.
	if s := ctx.Sender(); s != nil && !s.Equal(b.kernel) {
		b.log.Warn().Msg("execute_code cluster bridge refused a message from another actor")
		return
	}
	v, err := wire.Decode(env)
	if err != nil || env.GetIncarnation() != b.incarnation {
		b.log.Warn().Err(err).Msg("execute_code cluster bridge refused a message")
		return
	}
	switch m := v.(type) {
	case *wire.Notify:
		if b.notify != nil && b.notified < maxNotifyForwarded {
			b.notified++
			b.notify(capUTF8(m.Message, maxNotifyBytes))
		}
	case *wire.ToolCall:
		if ctx.Sender() == nil {
			return // a call must say who to answer
		}
		root, kernel, inc, seq, gctx, gate := ctx.ActorSystem().Root, b.kernel, b.incarnation, env.GetSeq(), b.ctx, b.gate
		if b.inFlight.Add(1) > maxCallsInFlight {
			b.inFlight.Add(-1)
			if out, err := wire.Encode(&wire.ToolAnswer{Text: "execute_code: too many helper calls at once"}, inc, seq); err == nil {
				ctx.Send(kernel, out)
			}
			return
		}
		run := func(context.Context) *wire.ToolAnswer {
			return &wire.ToolAnswer{Text: "execute_code: no helper calls in this cell"}
		}
		switch g := gate.(type) {
		case kernelhost.Admitter:
			// Here, in the mailbox's order, which is the order the node
			// sent its calls: the guard settles answers in that order.
			run = g.Admit(m)
		case Gate:
			run = func(ctx context.Context) *wire.ToolAnswer { return g.Run(ctx, m) }
		}
		go func() {
			defer b.inFlight.Add(-1)
			ans := run(gctx)
			if out, err := wire.Encode(ans, inc, seq); err == nil {
				root.Send(kernel, out)
			}
		}()
	}
}

// capUTF8 cuts s to at most n bytes without splitting a character.
func capUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
