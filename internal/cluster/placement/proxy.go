package placement

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/registry"
)

// KilledByNodeLost is a cell's killed_by when its kernel's node was lost.
const KilledByNodeLost = "node_lost"

// Gate runs one helper call of a remote cell here, on the session side:
// the runtime's is kernelhost.SessionGate around the cell's
// pump.GuardedGate, which decides every call again (docs/cluster.md).
type Gate = kernelhost.Gate

// Cell is one cell for a remote kernel: the RunCell (its Bridge is filled
// in here), the gate its helper calls run through, and where its
// notify()s go.
type Cell struct {
	Run    wire.RunCell
	Gate   Gate
	Notify func(string)
}

// execMsg is a Cell on its way to the proxy.
type execMsg struct {
	ctx   context.Context
	cell  Cell
	reply chan<- *wire.CellResult
}

// Execute queues cell on the remote kernel proxy and returns the channel
// its one result arrives on. ctx is the cell's caller: when it is done a
// queued cell leaves the queue and an active one is cancelled on the node
// (its kernel is then discarded), as a local worker does.
func Execute(ctx context.Context, root *actor.RootContext, proxy *actor.PID, cell Cell) <-chan *wire.CellResult {
	reply := make(chan *wire.CellResult, 1)
	root.Send(proxy, &execMsg{ctx: ctx, cell: cell, reply: reply})
	return reply
}

// proxy stands for one remote kernel in the registry: it speaks the
// kernelworker status and stop protocol the registry uses, queues cells
// and runs them on the node one at a time, and fails them all at once
// when the node is lost.
type proxy struct {
	key         registry.Key
	generation  uint64
	incarnation string
	node        *actor.PID // the node's kernelhost
	start       *wire.StartKernel
	started     chan<- error
	log         *zerolog.Logger
	stopTimeout time.Duration

	kernel    *actor.PID
	queue     []*queued
	active    *queued
	seq       uint64
	completed int
	stopping  bool
	ticket    uint64
}

type queued struct {
	msg    *execMsg
	ticket uint64
	seq    uint64
	bridge *actor.PID
	stop   func() bool
}

type (
	callerGone  struct{ ticket uint64 }
	stopTimeout struct{}
)

func (p *proxy) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.start.Owner = wire.PID{Address: ctx.Self().Address, ID: ctx.Self().Id}
		env, err := wire.Encode(p.start, p.incarnation, 0)
		if err != nil {
			p.failStart(ctx, err)
			return
		}
		ctx.Request(p.node, env)
		// The node's own death before it answers: watching its
		// kernelhost turns that into a Terminated.
		ctx.Watch(p.node)
	case *wire.Envelope:
		p.onEnvelope(ctx, m)
	case *execMsg:
		p.onExec(ctx, m)
	case callerGone:
		p.onCallerGone(ctx, m.ticket)
	case *kernelworker.StatusRequest:
		ctx.Respond(p.status())
	case *kernelworker.Stop:
		p.onStop(ctx, m.Reason)
	case stopTimeout:
		ctx.Stop(ctx.Self())
	case *actor.Terminated:
		p.onTerminated(ctx, m)
	case *actor.Stopping:
		p.failAll(kernelworker.ReasonKernelDiscarded, "")
		if p.started != nil {
			p.started <- errProxyStopped
			p.started = nil
		}
	}
}

func (p *proxy) failStart(ctx actor.Context, err error) {
	if p.started != nil {
		p.started <- err
		p.started = nil
	}
	ctx.Stop(ctx.Self())
}

func (p *proxy) onEnvelope(ctx actor.Context, env *wire.Envelope) {
	v, err := wire.Decode(env)
	if err != nil || env.GetIncarnation() != p.incarnation {
		p.log.Warn().Err(err).Msg("execute_code cluster proxy refused a message")
		return
	}
	switch m := v.(type) {
	case *wire.KernelStarted:
		if p.kernel != nil {
			return
		}
		p.kernel = actor.NewPID(m.Kernel.Address, m.Kernel.ID)
		ctx.Watch(p.kernel)
		if p.started != nil {
			p.started <- nil
			p.started = nil
		}
		p.next(ctx)
	case *wire.Refused:
		if p.kernel == nil {
			p.failStart(ctx, &RefusedError{Reason: m.Reason})
			return
		}
		if p.active != nil && p.active.seq == env.GetSeq() {
			p.finish(ctx, &wire.CellResult{Reason: kernelworker.ReasonKernelDiscarded})
		}
	case *wire.CellResult:
		if p.active != nil && p.active.seq == env.GetSeq() {
			p.completed++
			p.finish(ctx, m)
			if !m.StateRetained {
				// The node ends a kernel whose state is gone; the
				// registry learns it from this proxy's end.
				ctx.Stop(ctx.Self())
			}
		}
	}
}

func (p *proxy) onExec(ctx actor.Context, m *execMsg) {
	if p.stopping {
		m.reply <- &wire.CellResult{Reason: kernelworker.ReasonShuttingDown}
		return
	}
	p.ticket++
	q := &queued{msg: m, ticket: p.ticket}
	if m.ctx != nil {
		self, root, t := ctx.Self(), ctx.ActorSystem().Root, q.ticket
		q.stop = context.AfterFunc(m.ctx, func() { root.Send(self, callerGone{ticket: t}) })
	}
	p.queue = append(p.queue, q)
	p.next(ctx)
}

// next sends the first queued cell once the kernel is up and idle.
func (p *proxy) next(ctx actor.Context) {
	if p.kernel == nil || p.active != nil || len(p.queue) == 0 || p.stopping {
		return
	}
	q := p.queue[0]
	p.queue = p.queue[1:]
	p.seq++
	q.seq = p.seq
	b := &bridge{gate: q.msg.cell.Gate, notify: q.msg.cell.Notify, kernel: p.kernel, incarnation: p.incarnation, log: p.log}
	q.bridge = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return b }))
	run := q.msg.cell.Run
	run.Bridge = wire.PID{Address: q.bridge.Address, ID: q.bridge.Id}
	env, err := wire.Encode(&run, p.incarnation, q.seq)
	p.active = q
	if err != nil {
		p.finish(ctx, &wire.CellResult{Reason: kernelworker.ReasonInvalidRequest, StateRetained: true})
		return
	}
	ctx.Request(p.kernel, env)
}

// finish answers the active cell and moves on.
func (p *proxy) finish(ctx actor.Context, res *wire.CellResult) {
	q := p.active
	p.active = nil
	p.answer(ctx, q, res)
	p.next(ctx)
}

func (p *proxy) answer(ctx actor.Context, q *queued, res *wire.CellResult) {
	if q.stop != nil {
		q.stop()
	}
	if q.bridge != nil {
		ctx.Stop(q.bridge)
	}
	q.msg.reply <- res
}

func (p *proxy) onCallerGone(ctx actor.Context, ticket uint64) {
	for i, q := range p.queue {
		if q.ticket == ticket {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			p.answer(ctx, q, &wire.CellResult{Reason: kernelworker.ReasonKernelDiscarded, StateRetained: true})
			return
		}
	}
	if p.active != nil && p.active.ticket == ticket {
		if env, err := wire.Encode(&wire.CancelCell{}, p.incarnation, p.active.seq); err == nil {
			ctx.Send(p.kernel, env)
		}
	}
}

func (p *proxy) onStop(ctx actor.Context, reason string) {
	if p.stopping {
		return
	}
	p.stopping = true
	p.failAll(kernelworker.ReasonInterrupted, reason)
	if p.kernel == nil {
		ctx.Stop(ctx.Self())
		return
	}
	if env, err := wire.Encode(&wire.StopKernel{Reason: reason}, p.incarnation, 0); err == nil {
		ctx.Send(p.kernel, env)
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(p.stopTimeout, func() { root.Send(self, stopTimeout{}) })
}

func (p *proxy) onTerminated(ctx actor.Context, m *actor.Terminated) {
	lost := m.Why == actor.TerminatedReason_AddressTerminated
	switch {
	case p.kernel != nil && m.Who.Equal(p.kernel):
	case m.Who.Equal(p.node):
		if !lost && p.kernel != nil {
			return
		}
	default:
		return
	}
	if p.kernel == nil {
		p.failStart(ctx, ErrNodeLost)
		return
	}
	if lost {
		p.failAll(kernelworker.ReasonKernelDiscarded, KilledByNodeLost)
	} else {
		p.failAll(kernelworker.ReasonKernelDiscarded, "")
	}
	ctx.Stop(ctx.Self())
}

// failAll answers the active and every queued cell: none of them is
// replayed anywhere.
func (p *proxy) failAll(reason, killedBy string) {
	all := p.queue
	p.queue = nil
	if p.active != nil {
		all = append([]*queued{p.active}, all...)
		p.active = nil
	}
	for _, q := range all {
		res := &wire.CellResult{Reason: reason, KilledBy: killedBy}
		if q.seq == 0 {
			// Queued: nothing of it ran.
			if reason == kernelworker.ReasonInterrupted {
				res.Reason, res.KilledBy = kernelworker.ReasonShuttingDown, ""
			}
		} else {
			res.RequestID = "remote"
		}
		if q.stop != nil {
			q.stop()
		}
		q.msg.reply <- res
	}
}

func (p *proxy) status() *kernelworker.Status {
	phase := kernelworker.PhaseIdle
	switch {
	case p.stopping:
		phase = kernelworker.PhaseStopping
	case p.kernel == nil:
		phase = kernelworker.PhaseStarting
	case p.active != nil:
		phase = kernelworker.PhaseRunning
	}
	st := &kernelworker.Status{Phase: phase, Generation: p.generation, Key: p.key,
		QueueDepth: len(p.queue), CellsCompleted: p.completed, ProcessAlive: true}
	if p.active != nil {
		st.ActiveRequestID = "remote"
	}
	return st
}
