package registry

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

// Reasons sent to a worker in kernelworker.Stop; the worker reports them
// as killed_by of a cell it interrupts.
const (
	workerShutdown   = kernelworker.KilledByShutdown
	workerReset      = kernelworker.KilledByReset
	workerOwnerGone  = kernelworker.KilledByOwnerGone
	workerEvicted    = kernelworker.KilledByEvicted
	workerIdleReaped = kernelworker.KilledByIdleReaped
)

// quarantine is a kernel that left the live set and whose worker is
// being stopped (docs/architecture.md, Stopping a kernel, and crash
// reports).
type quarantine struct {
	entry  *entry
	reason telemetry.SessionStopReason
	token  uint64
	timer  *time.Timer
	failed bool
	// leases the kernel had: their contexts end with the worker, so the
	// worker's own stop, not a caller cancellation, decides how its cells
	// end.
	leases  []*lease
	waiters []resetWaiter
}

// resetWaiter is a Reset answered once the worker is gone.
type resetWaiter struct {
	to     replyTo
	forked bool
}

func (q *quarantine) answerWaiters(ctx actor.Context, r *registry, err error) {
	for _, w := range q.waiters {
		r.answer(ctx, w.to, &resetReply{Performed: true, Forked: w.forked, Err: err})
	}
	q.waiters = nil
}

// unlink removes a live kernel from every index: the live set, the idle
// list, the lease table and its owners (forgetting owners left with
// nothing). It returns the kernel's leases, already unregistered.
func (r *registry) unlink(ctx actor.Context, e *entry) []*lease {
	delete(r.entries, e.ekey)
	delete(r.workers, pidKey(e.pid))
	r.idle.remove(e)
	ls := make([]*lease, 0, len(e.leases))
	for id, l := range e.leases {
		delete(r.leases, id)
		l.stopWatch()
		ls = append(ls, l)
	}
	e.leases = map[uint64]*lease{}
	for _, o := range e.owners {
		delete(o.entries, e.ekey)
		r.forgetOwnerIfUnused(ctx, o, true)
	}
	e.owners = map[string]*owner{}
	return ls
}

// stopEntry quarantines a live kernel and starts stopping its worker. It
// returns at once: the registry never waits for a worker to die.
func (r *registry) stopEntry(ctx actor.Context, e *entry, reason telemetry.SessionStopReason, workerReason string) *quarantine {
	ls := r.unlink(ctx, e)
	r.stopToken++
	q := &quarantine{entry: e, reason: reason, token: r.stopToken, leases: ls}
	wk := pidKey(e.pid)
	r.stopping[wk] = q
	r.sendStop(ctx, e, workerReason)
	self, root, tok := ctx.Self(), ctx.ActorSystem().Root, q.token
	q.timer = time.AfterFunc(r.cfg.StopTimeout, func() { root.Send(self, stopExpired{worker: wk, token: tok}) })
	r.cfg.Logger.Debug().Str("reason", string(reason)).Int("live", r.live()).Msg("kernel stopping")
	r.ensureReap(ctx)
	return q
}

func (r *registry) sendStop(ctx actor.Context, e *entry, reason string) {
	ctx.Send(e.pid, &kernelworker.Stop{Reason: reason})
}

// onStopExpired: the worker did not stop in time. Its actor is stopped
// by force, the failure counted, a waiting reset told, and every reap
// tick tries again until its Terminated arrives.
func (r *registry) onStopExpired(ctx actor.Context, m stopExpired) {
	q, ok := r.stopping[m.worker]
	if !ok || q.token != m.token || q.failed {
		return
	}
	q.failed = true
	ctx.Stop(q.entry.pid)
	r.emit(telemetry.Fallback{Reason: telemetry.FallbackStopFailed})
	r.cfg.Logger.Warn().Msg("kernel worker did not stop in time; stopping its actor")
	q.answerWaiters(ctx, r, ErrStopFailed)
	for _, l := range q.leases {
		l.end(ErrStopFailed)
	}
	q.leases = nil
	r.ensureReap(ctx)
	r.answerStopAll(ctx)
}

// onStopAll stops every live kernel as a shutdown; the answer waits for
// their workers (and any stop already under way). An acquire still
// waiting fails with ErrShutdown; a kernel whose start is in flight is
// stopped as soon as it is up, and the answer waits for it too.
func (r *registry) onStopAll(ctx actor.Context, to replyTo) {
	for _, e := range r.entries {
		r.stopEntry(ctx, e, telemetry.StopShutdown, workerShutdown)
	}
	for _, p := range r.pending {
		if p.starting {
			p.stopAll = true
			continue
		}
		r.fail(ctx, p, fmt.Errorf("acquire: %w", ErrShutdown))
	}
	if to.some() {
		r.stopAllWaiters = append(r.stopAllWaiters, to)
	}
	r.answerStopAll(ctx)
}

// answerStopAll answers the StopAll requests once no stop is pending:
// no start StopAll caught is still in flight, and every kernel that was
// stopping is gone, or failed to stop in time.
func (r *registry) answerStopAll(ctx actor.Context) {
	if len(r.stopAllWaiters) == 0 {
		return
	}
	for _, p := range r.pending {
		if p.stopAll {
			return
		}
	}
	var err error
	for _, q := range r.stopping {
		if !q.failed {
			return
		}
		err = ErrStopFailed
	}
	for _, to := range r.stopAllWaiters {
		r.answer(ctx, to, &stopAllReply{Err: err})
	}
	r.stopAllWaiters = nil
}

// retryFailedStops is run by every reap tick.
func (r *registry) retryFailedStops(ctx actor.Context) {
	for _, q := range r.stopping {
		if q.failed {
			ctx.Stop(q.entry.pid)
		}
	}
}

// onTerminated handles the end of a watched actor: a worker the registry
// was stopping, a live worker that died on its own, or an owner.
func (r *registry) onTerminated(ctx actor.Context, who *actor.PID) {
	if who == nil || r.stillAlive(ctx, who) {
		return
	}
	k := pidKey(who)
	// Whatever it was, no query to it can be answered any more.
	defer r.resolveGone(k)
	_, isWorker := r.workers[k]
	_, isStopping := r.stopping[k]
	var exit kernelworker.Exit
	exitKnown := false
	if (isWorker || isStopping) && r.cfg.ExitOf != nil {
		exit, exitKnown = r.cfg.ExitOf(who)
	}
	if q, ok := r.stopping[k]; ok {
		delete(r.stopping, k)
		q.timer.Stop()
		for _, l := range q.leases {
			l.end(errLeaseEnded)
		}
		e := q.entry
		if exitKnown && exit.Crash != "" && q.reason == telemetry.StopShutdown {
			// Quarantined only because it no longer answered: the worker
			// had crashed on its own, and its report says why.
			r.emit(telemetry.SessionCrash{Duration: r.cfg.Now().Sub(e.startedAt), LiveKernels: r.live(),
				Capacity: e.capacity, Reason: exit.Crash})
		} else {
			r.emit(telemetry.SessionStop{
				Duration: r.cfg.Now().Sub(e.startedAt), LiveKernels: r.live(),
				Capacity: e.capacity, Reason: q.reason,
			})
		}
		q.answerWaiters(ctx, r, nil)
		return
	}
	if e, ok := r.workers[k]; ok {
		// Ended on its own: a crash, a protocol fault, or a self-stop
		// after a cancellation discarded the kernel. The worker's exit
		// report says which; without one the reason is unknown.
		// live_kernels is the exact count.
		for _, l := range r.unlink(ctx, e) {
			l.end(errLeaseEnded)
		}
		lifetime := r.cfg.Now().Sub(e.startedAt)
		if exitKnown && exit.Crash == "" {
			r.emit(telemetry.SessionStop{Duration: lifetime, LiveKernels: r.live(),
				Capacity: e.capacity, Reason: telemetry.StopShutdown})
			return
		}
		reason := telemetry.CrashUnknown
		if exitKnown {
			reason = exit.Crash
		}
		r.emit(telemetry.SessionCrash{Duration: lifetime, LiveKernels: r.live(),
			Capacity: e.capacity, Reason: reason})
		return
	}
	if o, ok := r.owners[k]; ok {
		r.depart(ctx, o, false)
	}
}

// stillAlive tells a Terminated the system sent from one sent by anybody
// else: protoactor unregisters a local actor before notifying its
// watchers, so a local PID still registered has not terminated.
func (r *registry) stillAlive(ctx actor.Context, who *actor.PID) bool {
	if who.Address != ctx.Self().Address {
		return false
	}
	_, ok := ctx.ActorSystem().ProcessRegistry.Get(who)
	return ok
}
