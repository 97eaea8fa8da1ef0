package transport

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// guardSends puts the transport between local actors and the library's
// process for remote PIDs, through the actor system's own seam for
// resolving other addresses: ours is registered first, and wraps the
// one the library registers when it starts. Every send to another node
// then passes guarded, which learns the peers the liveness check pings,
// refuses what would harm the connection, and ends sends once the
// transport stops.
func (t *Transport) guardSends() {
	reg := t.sys.ProcessRegistry
	library := len(reg.RemoteHandlers) + 1
	reg.RegisterAddressResolver(func(pid *actor.PID) (actor.Process, bool) {
		handlers := reg.RemoteHandlers
		if len(handlers) <= library {
			return nil, false
		}
		inner, ok := handlers[library](pid)
		if !ok {
			return nil, false
		}
		return &guarded{t: t, inner: inner}, true
	})
}

// guarded is the library's process for a remote PID, guarded.
type guarded struct {
	t     *Transport
	inner actor.Process
}

// enterSend admits a local send to addr into the library: not after the
// transport stopped, nor to a peer seen gone. The caller leaves with
// t.sending.Add(-1).
func (t *Transport) enterSend(addr string) bool {
	t.sending.Add(1)
	if t.closed.Load() || !t.live.admit(addr) {
		t.sending.Add(-1)
		return false
	}
	return true
}

// SendUserMessage sends what a peer's stream filter admits, to a peer
// not seen gone; anything else is a dead letter here, so a request fails
// at once with DeadLetterResponse. A message the peer would refuse must
// not leave: the peer closes the stream on it, which would tell every
// watcher of that node that it is gone.
func (g *guarded) SendUserMessage(pid *actor.PID, message any) {
	_, msg, _ := actor.UnwrapEnvelope(message)
	if !sendable(msg) || !g.t.enterSend(pid.GetAddress()) {
		g.t.sys.DeadLetter.SendUserMessage(pid, message)
		return
	}
	defer g.t.sending.Add(-1)
	g.inner.SendUserMessage(pid, message)
}

// SendSystemMessage sends a watch, an unwatch or a Terminated; a watch
// of an actor on a peer seen gone, or after the transport stopped, is
// answered Terminated{AddressTerminated} at once. Any other system
// message (a Stop of a remote actor) would close the stream: it is
// refused here.
func (g *guarded) SendSystemMessage(pid *actor.PID, message any) {
	switch message.(type) {
	case *actor.Watch, *actor.Unwatch, *actor.Terminated:
	default:
		g.t.sys.DeadLetter.SendSystemMessage(pid, message)
		return
	}
	if !g.t.enterSend(pid.GetAddress()) {
		if w, ok := message.(*actor.Watch); ok && w.GetWatcher() != nil {
			if ref, ok := g.t.sys.ProcessRegistry.GetLocal(w.GetWatcher().GetId()); ok {
				ref.SendSystemMessage(w.GetWatcher(), &actor.Terminated{Who: pid, Why: actor.TerminatedReason_AddressTerminated})
			}
		}
		return
	}
	defer g.t.sending.Add(-1)
	g.inner.SendSystemMessage(pid, message)
}

func (g *guarded) Stop(pid *actor.PID) { g.SendSystemMessage(pid, &actor.Stop{}) }

// sendable says whether a peer's stream filter admits msg as a user
// message (checkBatch).
func sendable(msg any) bool {
	switch m := msg.(type) {
	case *wire.Envelope:
		return m.GetKind() != pingKind && m.GetKind() != pongKind
	case *actor.DeadLetterResponse:
		return true
	}
	return false
}
