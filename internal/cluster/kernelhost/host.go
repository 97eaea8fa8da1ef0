package kernelhost

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// host is the kernelhost actor: hello, StartKernel, and its kernels as
// children.
type host struct {
	cfg         Config
	incarnation string
	// kernels are the live kernel actors by incarnation.
	kernels map[string]*actor.PID
	// directory is the session side that welcomed this node, watched.
	directory *actor.PID
	tick      *time.Timer
}

type helloTick struct{}

func newHost(cfg Config, inc string) *host {
	return &host{cfg: cfg, incarnation: inc, kernels: map[string]*actor.PID{}}
}

func (h *host) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.hello(ctx)
	case helloTick:
		h.hello(ctx)
	case *actor.Stopping:
		if h.tick != nil {
			h.tick.Stop()
		}
	case *actor.Terminated:
		h.onTerminated(ctx, m)
	case *wire.Envelope:
		h.onEnvelope(ctx, m)
	}
}

// hello announces the node until a directory welcomes it.
func (h *host) hello(ctx actor.Context) {
	if h.cfg.Directory == nil || h.directory != nil {
		return
	}
	env, err := wire.Encode(&wire.NodeHello{
		Node:        wire.PID{Address: ctx.Self().Address, ID: ctx.Self().Id},
		Incarnation: h.incarnation, Capacity: h.cfg.Capacity,
	}, h.incarnation, 0)
	if err == nil {
		ctx.Request(h.cfg.Directory, env)
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	h.tick = time.AfterFunc(h.cfg.HelloInterval, func() { root.Send(self, helloTick{}) })
}

func (h *host) onTerminated(ctx actor.Context, m *actor.Terminated) {
	if h.directory != nil && m.Who.Equal(h.directory) {
		// The session side is gone (its kernels' owners go with it, and
		// each kernel reaps itself); wait for the next one.
		h.cfg.Logger.Warn().Str("why", m.Why.String()).Msg("execute_code node lost its session side")
		h.directory = nil
		h.hello(ctx)
		return
	}
	for inc, pid := range h.kernels {
		if pid.Equal(m.Who) {
			delete(h.kernels, inc)
			return
		}
	}
}

func (h *host) onEnvelope(ctx actor.Context, env *wire.Envelope) {
	v, err := wire.Decode(env)
	if err != nil {
		h.cfg.Logger.Warn().Err(err).Msg("execute_code node refused a message")
		refuse(ctx, ctx.Sender(), env.GetIncarnation(), env.GetSeq(), err.Error())
		return
	}
	switch m := v.(type) {
	case *wire.NodeWelcome:
		if h.directory != nil || env.GetIncarnation() != h.incarnation {
			return
		}
		h.directory = actor.NewPID(m.Directory.Address, m.Directory.ID)
		if h.tick != nil {
			h.tick.Stop()
		}
		ctx.Watch(h.directory)
		h.cfg.Logger.Info().Str("session", m.Directory.Address).Msg("execute_code node joined")
	case *wire.StartKernel:
		h.startKernel(ctx, env, m)
	default:
		refuse(ctx, ctx.Sender(), env.GetIncarnation(), env.GetSeq(), "kernelhost takes no "+env.GetKind())
	}
}

func (h *host) startKernel(ctx actor.Context, env *wire.Envelope, m *wire.StartKernel) {
	inc, asker := env.GetIncarnation(), ctx.Sender()
	if _, taken := h.kernels[inc]; taken {
		refuse(ctx, asker, inc, env.GetSeq(), "kernel incarnation already in use")
		return
	}
	if len(h.kernels) >= h.cfg.Capacity {
		refuse(ctx, asker, inc, env.GetSeq(), ErrNoCapacity.Error())
		return
	}
	k := &kernelActor{cfg: h.cfg, incarnation: inc, req: m, asker: asker, seq: env.GetSeq()}
	pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return k }), "kernel-"+inc)
	if err != nil {
		refuse(ctx, asker, inc, env.GetSeq(), "kernel could not be spawned")
		return
	}
	h.kernels[inc] = pid
	ctx.Watch(pid)
}
