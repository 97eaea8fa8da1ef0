package registry

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/telemetry"
)

// ensureReap arms the reaper's timer while there is anything to reap or
// a stop to retry. At most one timer is pending; its tick carries a
// token so a tick from a replaced timer is ignored. The timer's callback
// only sends the actor a message.
func (r *registry) ensureReap(ctx actor.Context) {
	if r.reapTimer != nil || (len(r.entries) == 0 && len(r.stopping) == 0) {
		return
	}
	r.reapToken++
	self, root, tok := ctx.Self(), ctx.ActorSystem().Root, r.reapToken
	r.reapTimer = time.AfterFunc(r.cfg.ReapInterval, func() { root.Send(self, reapTick{token: tok}) })
}

func (r *registry) onReapTick(ctx actor.Context, m reapTick) {
	if m.token != r.reapToken || r.reapTimer == nil {
		return
	}
	r.reapTimer = nil
	r.reap(ctx)
	r.ensureReap(ctx)
}

// reap is one pass of idle reaping: a kernel whose status is invalid
// is stopped (reap reason unreachable); a kernel idle for at least its
// idle timeout, with no lease and nothing running or queued, is stopped
// (reason idle). Running, queued or leased kernels are never reaped for
// idleness. Then failed stops are retried. The statuses are awaited
// without blocking the registry; a kernel that was stopped, or got a
// lease, while they came is judged on what it is now.
func (r *registry) reap(ctx actor.Context) {
	es := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		es = append(es, e)
	}
	r.statuses(ctx, es, func(sts map[*entry]workerStatus) {
		now := r.cfg.Now()
		for _, e := range es {
			if r.entries[e.ekey] != e {
				continue
			}
			idleFor := now.Sub(e.lastUse)
			switch st := sts[e]; {
			case st.phase == phaseUnreachable:
				r.stopEntry(ctx, e, telemetry.StopShutdown, workerShutdown)
				r.emit(telemetry.SessionReap{Idle: idleFor, LiveKernels: r.live(), Capacity: e.capacity, Reason: telemetry.ReapUnreachable})
			case e.idleTimeout >= 0 && idleFor >= e.idleTimeout && len(e.leases) == 0 && st.quiescent():
				r.stopEntry(ctx, e, telemetry.StopShutdown, workerIdleReaped)
				r.emit(telemetry.SessionReap{Idle: idleFor, LiveKernels: r.live(), Capacity: e.capacity, Reason: telemetry.ReapIdle})
			}
		}
		r.retryFailedStops(ctx)
	})
}
