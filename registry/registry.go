package registry

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/telemetry"
)

// registry is the actor's state; only Receive touches it.
type registry struct {
	cfg Config

	entries  map[string]*entry      // effective key → live kernel
	workers  map[string]*entry      // worker PID → live kernel
	stopping map[string]*quarantine // worker PID → kernel being stopped
	owners   map[string]*owner      // owner PID → owner
	leases   map[uint64]*lease
	idle     idleList

	nextGeneration uint64
	nextLease      uint64
	stopToken      uint64

	reapTimer *time.Timer
	reapToken uint64

	// The bounds of the most recent acquire: what the snapshot reports
	// as in effect.
	effMax  int
	effIdle time.Duration

	// stopAllWaiters are StopAll requests answered once every stop is
	// over (see answerStopAll).
	stopAllWaiters []*actor.PID
}

// entry is a live kernel.
type entry struct {
	ekey       string
	key        Key
	forkOwner  string // owner PID key of a fork kernel; "" for a base kernel
	pid        *actor.PID
	bells      *pump.Bells
	workspace  string
	generation uint64
	owners     map[string]*owner
	leases     map[uint64]*lease
	lastUse    time.Time
	startedAt  time.Time
	// idleTimeout < 0: never reaped for idleness.
	idleTimeout time.Duration
	capacity    int

	older, newer *entry // idleList links
	inIdle       bool
}

// owner is a watched session actor with kernels or forks.
type owner struct {
	pid     *actor.PID
	key     string
	entries map[string]*entry
	forks   map[string]struct{} // digests of base keys this owner forked
}

func newRegistry(cfg Config) *registry {
	return &registry{
		cfg:            cfg,
		entries:        map[string]*entry{},
		workers:        map[string]*entry{},
		stopping:       map[string]*quarantine{},
		owners:         map[string]*owner{},
		leases:         map[uint64]*lease{},
		nextGeneration: 1,
		effMax:         cfg.MaxLiveKernels,
		effIdle:        cfg.IdleTimeout,
	}
}

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Acquire:
		ctx.Respond(r.onAcquire(ctx, m))
	case Acquire:
		ctx.Respond(r.onAcquire(ctx, &m))
	case *Release:
		ctx.Respond(r.onRelease(m))
	case Release:
		ctx.Respond(r.onRelease(&m))
	case *Reset:
		r.onReset(ctx, m)
	case Reset:
		r.onReset(ctx, &m)
	case *Detach:
		ctx.Respond(r.onDetach(ctx, m))
	case Detach:
		ctx.Respond(r.onDetach(ctx, &m))
	case *StopAll, StopAll:
		r.onStopAll(ctx)
	case *SnapshotRequest, SnapshotRequest:
		ctx.Respond(r.snapshot(ctx))
	case *actor.Terminated:
		r.onTerminated(ctx, m.Who)
		r.answerStopAll(ctx)
	case callerDone:
		r.onCallerDone(m)
	case reapTick:
		r.onReapTick(ctx, m)
	case reapIdle:
		r.reap(ctx)
	case stopExpired:
		r.onStopExpired(ctx, m)
	case *actor.Stopping, *actor.Restarting:
		r.shutdown(ctx)
	}
}

func pidKey(pid *actor.PID) string { return pid.Address + "/" + pid.Id }

func (r *registry) emit(e telemetry.Event) { r.cfg.Telemetry.Emit(e) }

// ensureOwner returns o's record, watching it if it is new.
func (r *registry) ensureOwner(ctx actor.Context, pid *actor.PID) *owner {
	k := pidKey(pid)
	if o, ok := r.owners[k]; ok {
		return o
	}
	o := &owner{pid: pid, key: k, entries: map[string]*entry{}, forks: map[string]struct{}{}}
	r.owners[k] = o
	ctx.Watch(pid)
	return o
}

// attach makes o an owner of e.
func (r *registry) attach(ctx actor.Context, e *entry, pid *actor.PID) *owner {
	o := r.ensureOwner(ctx, pid)
	e.owners[o.key] = o
	o.entries[e.ekey] = e
	return o
}

// forgetOwnerIfUnused drops an owner with neither kernels nor forks,
// unwatching it when it is still alive.
func (r *registry) forgetOwnerIfUnused(ctx actor.Context, o *owner, alive bool) {
	if len(o.entries) > 0 || len(o.forks) > 0 {
		return
	}
	delete(r.owners, o.key)
	if alive {
		ctx.Unwatch(o.pid)
	}
}

// shutdown runs when the actor stops or restarts: its state dies with
// it, so every kernel it knows is told to stop (no worker outlives its
// registry), every timer is stopped, every lease ends and every waiting
// reset is answered.
func (r *registry) shutdown(ctx actor.Context) {
	if r.reapTimer != nil {
		r.reapTimer.Stop()
		r.reapTimer = nil
	}
	for _, e := range r.entries {
		r.sendStop(ctx, e, workerShutdown)
		for _, l := range e.leases {
			l.end(errRegistryStopped)
		}
	}
	for _, q := range r.stopping {
		q.timer.Stop()
		for _, l := range q.leases {
			l.end(errRegistryStopped)
		}
		q.answerWaiters(ctx, ErrStopFailed)
	}
	*r = *newRegistry(r.cfg)
}
