package placement

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// bridge is a remote cell's session-side end: each ToolCall from the
// cell's kernel runs through the cell's gate here, and each notify() goes
// to the caller. It lives as long as its cell; its stop cancels every call
// still running.
type bridge struct {
	gate        Gate
	notify      func(string)
	kernel      *actor.PID
	incarnation string
	log         *zerolog.Logger
	ctx         context.Context
	cancel      context.CancelFunc
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
		if b.notify != nil {
			b.notify(m.Message)
		}
	case *wire.ToolCall:
		if ctx.Sender() == nil {
			return // a call must say who to answer
		}
		root, kernel, inc, seq, gctx, gate := ctx.ActorSystem().Root, b.kernel, b.incarnation, env.GetSeq(), b.ctx, b.gate
		go func() {
			ans := &wire.ToolAnswer{Text: "execute_code: no helper calls in this cell"}
			if gate != nil {
				ans = gate.Run(gctx, m)
			}
			if out, err := wire.Encode(ans, inc, seq); err == nil {
				root.Send(kernel, out)
			}
		}()
	}
}
