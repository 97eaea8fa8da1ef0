package registry

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/telemetry"
)

// leaveKernel removes o from e (docs/architecture.md, Owner departure). A
// kernel left without owners stops at once. Otherwise o's leases on e end
// with cause ErrOwnerGone: the worker drops o's queued cells and, if o's
// cell is the active one, cancels it and discards the kernel; the co-owners
// keep it otherwise.
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

// depart is an owner's detach or death (docs/architecture.md, Owner
// departure): it leaves every kernel, its waiting acquires are marked gone,
// and it loses its forks.
func (r *registry) depart(ctx actor.Context, o *owner, alive bool) {
	for _, e := range o.entries {
		r.leaveKernel(ctx, e, o)
	}
	r.dropWaiters(o)
	clear(o.forks)
	r.forgetOwnerIfUnused(ctx, o, alive)
}

func (r *registry) onDetach(ctx actor.Context, m *detachMsg) *detachReply {
	if m.Owner == nil {
		return &detachReply{}
	}
	if o, ok := r.owners[pidKey(m.Owner)]; ok {
		r.depart(ctx, o, true)
	}
	return &detachReply{}
}

// onReset discards the owner's state (docs/architecture.md, Reset and
// forks). Stopping the owner's own kernel answers once its worker is gone
// (or with ErrStopFailed), so the caller never runs code next to the state
// it asked to discard. A reset of a key whose acquire is pending waits until
// that is over.
func (r *registry) onReset(ctx actor.Context, m *resetMsg, to replyTo) {
	if m.Owner == nil || !m.Key.complete() {
		r.answer(ctx, to, &resetReply{Err: fmt.Errorf("reset: %w", ErrInvalidRequest)})
		return
	}
	digest := m.Key.Digest()
	ekey, forked := r.effectiveKey(digest, m.Owner)
	if p, ok := r.pending[ekey]; ok {
		p.deferred = append(p.deferred, deferredReset{m: m, to: to})
		return
	}
	e, ok := r.entries[ekey]
	if !ok {
		r.answer(ctx, to, &resetReply{Forked: forked})
		return
	}
	ok = false
	if !forked {
		_, ok = e.owners[pidKey(m.Owner)]
		ok = ok && len(e.owners) == 1
	}
	if forked || ok {
		q := r.stopEntry(ctx, e, telemetry.StopReset, workerReset)
		q.waiters = append(q.waiters, resetWaiter{to: to, forked: forked})
		return
	}
	// Co-owned (or not owned by the requester): only the requester moves
	// to a fork of its own; its next acquire starts a fresh kernel there.
	o := r.ensureOwner(ctx, m.Owner)
	if _, mine := e.owners[o.key]; mine {
		r.leaveKernel(ctx, e, o)
	}
	o.forks[digest] = struct{}{}
	r.answer(ctx, to, &resetReply{Performed: true, Forked: true})
}
