package registry

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/telemetry"
)

// leaveKernel removes o from e (docs/architecture.md, Owner departure). A
// kernel left without owners
// stops at once. Otherwise o's leases on e end with cause ErrOwnerGone:
// the worker drops o's queued cells and, if o's cell is the active one,
// cancels it and discards the kernel; the co-owners keep it otherwise.
func (r *registry) leaveKernel(ctx actor.Context, e *entry, o *owner) {
	delete(e.owners, o.key)
	delete(o.entries, e.ekey)
	if len(e.owners) == 0 {
		r.stopEntry(ctx, e, telemetry.StopOwnerDetached, workerOwnerGone)
		return
	}
	for _, l := range e.leases {
		if l.owner == o {
			r.release(l, ErrOwnerGone)
		}
	}
}

// depart is an owner's detach or death: it leaves every
// kernel and loses its forks.
func (r *registry) depart(ctx actor.Context, o *owner, alive bool) {
	for _, e := range o.entries {
		r.leaveKernel(ctx, e, o)
	}
	clear(o.forks)
	r.forgetOwnerIfUnused(ctx, o, alive)
}

func (r *registry) onDetach(ctx actor.Context, m *Detach) *DetachReply {
	if m.Owner == nil {
		return &DetachReply{}
	}
	if o, ok := r.owners[pidKey(m.Owner)]; ok {
		r.depart(ctx, o, true)
	}
	return &DetachReply{}
}

// onReset discards the owner's state (docs/architecture.md, Reset and
// forks). Stopping the owner's own
// kernel answers once its worker is gone (or with ErrStopFailed), so the
// caller never runs code next to the state it asked to discard.
func (r *registry) onReset(ctx actor.Context, m *Reset) {
	if m.Owner == nil || !m.Key.complete() {
		ctx.Respond(&ResetReply{Err: fmt.Errorf("reset: %w", ErrInvalidRequest)})
		return
	}
	digest := m.Key.Digest()
	ekey, forked := r.effectiveKey(digest, m.Owner)
	e, ok := r.entries[ekey]
	if !ok {
		ctx.Respond(&ResetReply{Forked: forked})
		return
	}
	ok = false
	if !forked {
		_, ok = e.owners[pidKey(m.Owner)]
		ok = ok && len(e.owners) == 1
	}
	if forked || ok {
		q := r.stopEntry(ctx, e, telemetry.StopReset, workerReset)
		if s := ctx.Sender(); s != nil {
			q.waiters = append(q.waiters, resetWaiter{to: s, forked: forked})
		}
		return
	}
	// Co-owned (or not owned by the requester): only the requester moves
	// to a fork of its own; its next acquire starts a fresh kernel there.
	o := r.ensureOwner(ctx, m.Owner)
	if _, mine := e.owners[o.key]; mine {
		r.leaveKernel(ctx, e, o)
	}
	o.forks[digest] = struct{}{}
	ctx.Respond(&ResetReply{Performed: true, Forked: true})
}
