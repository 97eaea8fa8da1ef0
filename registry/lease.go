package registry

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// Lease is one caller's checkout of a kernel, from Acquire until Release
// or the caller's end. It is opaque: only the registry that issued it can
// interpret it.
type Lease struct {
	id         uint64
	generation uint64
	worker     *actor.PID
	ctx        context.Context
}

// Context is done when the lease ends: its caller's context is done, it was
// released, or its owner detached or died (cause ErrOwnerGone). Pass it (or
// a context derived from it) as the cell's Execute.Ctx, so that an owner's
// departure removes its queued cell and discards the kernel only when its
// cell is the active one (docs/architecture.md, Owner departure). The zero
// Lease's Context is already done.
func (l Lease) Context() context.Context {
	if l.ctx == nil {
		return doneContext
	}
	return l.ctx
}

var doneContext = endedContext(context.Canceled)

// endedContext is a context already done with cause.
func endedContext(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}

// lease is the registry's record of a Lease.
type lease struct {
	id        uint64
	entry     *entry
	owner     *owner
	ctx       context.Context
	cancel    context.CancelCauseFunc
	stopWatch func() bool
}

func (l *lease) public() Lease {
	return Lease{id: l.id, generation: l.entry.generation, worker: l.entry.pid, ctx: l.ctx}
}

// end forgets the caller's context and cancels the lease's own.
func (l *lease) end(cause error) {
	l.stopWatch()
	l.cancel(cause)
}

// checkout gives caller a lease on e for o. The caller's end is reported
// to the actor by a context.AfterFunc that only sends a message.
func (r *registry) checkout(ctx actor.Context, e *entry, o *owner, caller context.Context) *lease {
	r.nextLease++
	lctx, cancel := context.WithCancelCause(caller)
	l := &lease{id: r.nextLease, entry: e, owner: o, ctx: lctx, cancel: cancel}
	self, root, id := ctx.Self(), ctx.ActorSystem().Root, l.id
	l.stopWatch = context.AfterFunc(caller, func() { root.Send(self, callerDone{lease: id}) })
	if len(e.leases) == 0 {
		r.idle.remove(e)
	}
	e.leases[l.id] = l
	r.leases[l.id] = l
	e.lastUse = r.cfg.Now()
	return l
}

// release ends a registered lease: its kernel becomes
// the most recently used idle candidate when no lease remains.
func (r *registry) release(l *lease, cause error) {
	delete(r.leases, l.id)
	e := l.entry
	delete(e.leases, l.id)
	l.end(cause)
	e.lastUse = r.cfg.Now()
	if len(e.leases) == 0 {
		r.idle.pushNewest(e)
	}
}

func (r *registry) onRelease(m *releaseMsg) *releaseReply {
	lid := m.Lease.id
	if lid == 0 || lid > r.nextLease {
		return &releaseReply{Err: fmt.Errorf("release: %w", ErrInvalidLease)}
	}
	l, ok := r.leases[lid]
	if !ok {
		// Already released, or its kernel was stopped: a stale lease never
		// touches a later generation.
		return &releaseReply{}
	}
	if l.entry.generation != m.Lease.generation || !l.entry.pid.Equal(m.Lease.worker) {
		return &releaseReply{Err: fmt.Errorf("release: %w", ErrInvalidLease)}
	}
	r.release(l, errLeaseEnded)
	return &releaseReply{}
}

// onCallerDone releases the lease of a caller whose context ended; the
// owner stays attached.
func (r *registry) onCallerDone(m callerDone) {
	if l, ok := r.leases[m.lease]; ok {
		r.release(l, context.Cause(l.ctx))
	}
}
