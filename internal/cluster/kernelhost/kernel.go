package kernelhost

import (
	"context"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// kernelActor is one kernel of the node: it starts it, runs one cell at a
// time (the session side's proxy queues them), forwards the cell's helper
// calls to the cell's bridge, and ends the kernel when its owner is gone,
// when asked, or when a cell lost its state.
type kernelActor struct {
	cfg         Config
	incarnation string
	req         *wire.StartKernel
	owner       *actor.PID
	// asker and seq are the StartKernel to answer once the kernel is up.
	asker *actor.PID
	seq   uint64

	ctx    context.Context
	cancel context.CancelFunc
	kernel Kernel
	// started hands the kernel from its start to whichever comes first:
	// the actor, or the actor's stop (which then ends it).
	started startSlot
	cell    *activeCell
	// calls are the helper calls in flight to the session side, by the
	// seq of their ToolCall.
	calls    map[uint64]chan *wire.ToolAnswer
	nextCall uint64
	// lost: a cell ended without the kernel's state.
	lost bool
}

// msgCellEnded answers a helper call whose cell is over.
const msgCellEnded = "execute_code: the cell has ended"

// activeCell is the cell running now.
type activeCell struct {
	seq    uint64
	from   *actor.PID
	bridge *actor.PID
	cancel context.CancelFunc
}

// Messages the kernel actor sends itself from its goroutines.
type (
	kernelStarted struct {
		kernel Kernel
		err    error
	}
	cellDone struct {
		seq uint64
		res *wire.CellResult
	}
	gateCall struct {
		call  *wire.ToolCall
		reply chan *wire.ToolAnswer
	}
)

func (k *kernelActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		k.start(ctx)
	case kernelStarted:
		k.onStarted(ctx, m)
	case *wire.Envelope:
		k.onEnvelope(ctx, m)
	case gateCall:
		k.forward(ctx, m)
	case cellDone:
		k.onCellDone(ctx, m)
	case *actor.Terminated:
		if k.owner != nil && m.Who.Equal(k.owner) {
			// The session side let go of the kernel, or is gone: nobody
			// can reach its state again.
			k.cfg.Logger.Info().Str("why", m.Why.String()).Msg("execute_code node kernel lost its owner")
			ctx.Stop(ctx.Self())
		}
	case *actor.Stopping:
		k.stopping()
	}
}

func (k *kernelActor) start(ctx actor.Context) {
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.calls = map[uint64]chan *wire.ToolAnswer{}
	k.owner = actor.NewPID(k.req.Owner.Address, k.req.Owner.ID)
	ctx.Watch(k.owner)
	self, root, host, inc, req := ctx.Self(), ctx.ActorSystem().Root, k.cfg.Host, k.incarnation, k.req
	go func() {
		kern, err := host.StartKernel(k.ctx, inc, req)
		if err == nil && !k.started.put(kern) {
			// The actor stopped during the start: nobody will ever run a
			// cell on this kernel.
			stopCtx, cancel := context.WithTimeout(context.Background(), k.cfg.StopTimeout)
			kern.Stop(stopCtx)
			cancel()
			return
		}
		root.Send(self, kernelStarted{kernel: kern, err: err})
	}()
}

// startSlot is the one place a started kernel and the actor's stop meet.
type startSlot struct {
	mu      sync.Mutex
	stopped bool
	kernel  Kernel
}

// put keeps kern unless the actor stopped; false means the caller must
// end kern itself.
func (s *startSlot) put(kern Kernel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.kernel = kern
	return true
}

// stop marks the actor stopped and returns the kernel to end, if any.
func (s *startSlot) stop() Kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	return s.kernel
}

func (k *kernelActor) onStarted(ctx actor.Context, m kernelStarted) {
	if m.err != nil {
		k.cfg.Logger.Warn().Err(m.err).Msg("execute_code node kernel did not start")
		refuse(ctx, k.asker, k.incarnation, k.seq, "kernel did not start: "+m.err.Error())
		ctx.Stop(ctx.Self())
		return
	}
	k.kernel = m.kernel
	reply(ctx, k.asker, &wire.KernelStarted{Kernel: wire.PID{Address: ctx.Self().Address, ID: ctx.Self().Id}}, k.incarnation, k.seq)
}

func (k *kernelActor) onEnvelope(ctx actor.Context, env *wire.Envelope) {
	v, err := wire.Decode(env)
	if err != nil {
		refuse(ctx, ctx.Sender(), env.GetIncarnation(), env.GetSeq(), err.Error())
		return
	}
	if env.GetIncarnation() != k.incarnation {
		// A PID that outlived its kernel: the name matched, the kernel
		// did not.
		refuse(ctx, ctx.Sender(), env.GetIncarnation(), env.GetSeq(), "no kernel of that incarnation")
		return
	}
	switch m := v.(type) {
	case *wire.RunCell:
		k.run(ctx, env.GetSeq(), m)
	case *wire.CancelCell:
		if k.cell != nil && k.cell.seq == env.GetSeq() {
			k.cell.cancel()
		}
	case *wire.ToolAnswer:
		if ch, ok := k.calls[env.GetSeq()]; ok {
			delete(k.calls, env.GetSeq())
			ch <- m
		}
	case *wire.StopKernel:
		ctx.Stop(ctx.Self())
	default:
		refuse(ctx, ctx.Sender(), k.incarnation, env.GetSeq(), "a kernel takes no "+env.GetKind())
	}
}

func (k *kernelActor) run(ctx actor.Context, seq uint64, cell *wire.RunCell) {
	from := ctx.Sender()
	switch {
	case k.kernel == nil:
		refuse(ctx, from, k.incarnation, seq, "kernel not started")
		return
	case k.cell != nil:
		refuse(ctx, from, k.incarnation, seq, "kernel is running another cell")
		return
	case k.lost:
		refuse(ctx, from, k.incarnation, seq, "kernel lost its state")
		return
	}
	cellCtx, cancel := context.WithCancel(k.ctx)
	bridge := actor.NewPID(cell.Bridge.Address, cell.Bridge.ID)
	k.cell = &activeCell{seq: seq, from: from, bridge: bridge, cancel: cancel}
	self, root, inc, kern := ctx.Self(), ctx.ActorSystem().Root, k.incarnation, k.kernel
	gate := actorGate{root: root, self: self}
	notify := func(msg string) {
		if env, err := wire.Encode(&wire.Notify{Message: msg}, inc, seq); err == nil {
			root.Send(bridge, env)
		}
	}
	go func() {
		defer cancel()
		res := kern.Run(cellCtx, cell, gate, notify)
		root.Send(self, cellDone{seq: seq, res: res})
	}()
}

// forward sends a helper call of the active cell to its bridge.
func (k *kernelActor) forward(ctx actor.Context, m gateCall) {
	if k.cell == nil {
		m.reply <- &wire.ToolAnswer{Text: msgCellEnded}
		return
	}
	k.nextCall++
	env, err := wire.Encode(m.call, k.incarnation, k.nextCall)
	if err != nil {
		m.reply <- &wire.ToolAnswer{Text: "execute_code: the call could not be sent: " + err.Error()}
		return
	}
	k.calls[k.nextCall] = m.reply
	// A request, so the bridge knows the call is its kernel's.
	ctx.Request(k.cell.bridge, env)
}

func (k *kernelActor) onCellDone(ctx actor.Context, m cellDone) {
	if k.cell == nil || k.cell.seq != m.seq {
		return
	}
	from := k.cell.from
	k.cell = nil
	k.failCalls()
	reply(ctx, from, m.res, k.incarnation, m.seq)
	if !m.res.StateRetained {
		// The kernel's state is gone (it died, or a limit or a cancel
		// discarded it): it takes no more cells, and ends when its owner
		// lets go, which the owner does on this answer. Ending it here
		// could overtake the answer: a Terminated is a system message,
		// delivered before the mailbox's user messages.
		k.lost = true
	}
}

// failCalls answers every helper call still in flight: its cell is over.
func (k *kernelActor) failCalls() {
	for seq, ch := range k.calls {
		ch <- &wire.ToolAnswer{Text: msgCellEnded}
		delete(k.calls, seq)
	}
}

func (k *kernelActor) stopping() {
	if k.cancel != nil {
		k.cancel()
	}
	k.failCalls()
	if kern := k.started.stop(); kern != nil {
		ctx, cancel := context.WithTimeout(context.Background(), k.cfg.StopTimeout)
		defer cancel()
		kern.Stop(ctx)
	}
}

// actorGate runs a helper call through the kernel actor, which owns the
// correlation with the session side's answers. It is a Sender: calls sent
// one after the other reach the actor, and leave for the bridge, in that
// order.
type actorGate struct {
	root *actor.RootContext
	self *actor.PID
}

func (g actorGate) Send(_ context.Context, call *wire.ToolCall) <-chan *wire.ToolAnswer {
	// Buffered: the actor never blocks on a caller that gave up.
	reply := make(chan *wire.ToolAnswer, 1)
	g.root.Send(g.self, gateCall{call: call, reply: reply})
	return reply
}

func (g actorGate) Run(ctx context.Context, call *wire.ToolCall) *wire.ToolAnswer {
	select {
	case a := <-g.Send(ctx, call):
		return a
	case <-ctx.Done():
		return &wire.ToolAnswer{Text: "execute_code: the call was cancelled"}
	}
}
