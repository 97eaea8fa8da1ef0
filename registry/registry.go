package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/kernelworker"
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
	stopAllWaiters []replyTo

	// pending holds the acquires that wait, by effective key (see
	// pending); starts counts those whose kernel is being started, which
	// hold a slot under the cap.
	pending map[string]*pending
	starts  int
	flights map[*flight]struct{}
	// queries are the status requests in flight, by worker PID.
	queries map[string][]*statusQuery
	// startCtx is every Starter's context; shutdown cancels it.
	startCtx    context.Context
	cancelStart context.CancelFunc
}

// entry is a live kernel.
type entry struct {
	ekey      string
	key       Key
	forkOwner string // owner PID key of a fork kernel; "" for a base kernel
	pid       *actor.PID
	worker    kernelworker.Client
	// view is the worker's status without a message, nil for a worker
	// that publishes none (kernelworker.StatusView).
	view       *kernelworker.StatusView
	bells      *bell.Pair
	workspace  string
	remote     bool
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

// owner is a watched session actor with kernels, forks or acquires
// waiting.
type owner struct {
	pid     *actor.PID
	key     string
	entries map[string]*entry
	forks   map[string]struct{} // digests of base keys this owner forked
	waiting int                 // its acquires in pending
}

func newRegistry(cfg Config) *registry {
	startCtx, cancel := context.WithCancel(context.Background())
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
		pending:        map[string]*pending{},
		flights:        map[*flight]struct{}{},
		queries:        map[string][]*statusQuery{},
		startCtx:       startCtx,
		cancelStart:    cancel,
	}
}

func (r *registry) Receive(ctx actor.Context) {
	to := replyTo{pid: ctx.Sender()}
	if m, ok := ctx.Message().(interface{ replyChan() chan<- any }); ok {
		to.ch = m.replyChan()
	}
	switch m := ctx.Message().(type) {
	case *acquireMsg:
		r.onAcquire(ctx, m, to)
	case acquireMsg:
		r.onAcquire(ctx, &m, to)
	case *releaseMsg:
		r.answer(ctx, to, r.onRelease(m))
	case releaseMsg:
		r.answer(ctx, to, r.onRelease(&m))
	case *resetMsg:
		r.onReset(ctx, m, to)
	case resetMsg:
		r.onReset(ctx, &m, to)
	case *detachMsg:
		r.answer(ctx, to, r.onDetach(ctx, m))
	case detachMsg:
		r.answer(ctx, to, r.onDetach(ctx, &m))
	case *stopAllMsg, stopAllMsg:
		r.onStopAll(ctx, to)
	case *SnapshotRequest, SnapshotRequest:
		r.onSnapshot(ctx, to)
	case *actor.Terminated:
		r.onTerminated(ctx, m.Who)
		r.answerStopAll(ctx)
	case started:
		r.onStarted(ctx, m.flight)
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

// replyTo is where an answer goes: a Client's reply channel, the sender
// of a request (a future), or nowhere for a plain send.
type replyTo struct {
	ch  chan<- any
	pid *actor.PID
}

func (to replyTo) some() bool { return to.ch != nil || to.pid != nil }

// answer never blocks: a reply channel holds the one answer, and a reply
// to a sender is a send.
func (r *registry) answer(ctx actor.Context, to replyTo, v any) {
	switch {
	case to.ch != nil:
		select {
		case to.ch <- v:
		default:
		}
	case to.pid != nil:
		ctx.Send(to.pid, v)
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
func (r *registry) attach(e *entry, o *owner) {
	e.owners[o.key] = o
	o.entries[e.ekey] = e
}

// forgetOwnerIfUnused drops an owner with neither kernels nor forks,
// unwatching it when it is still alive.
func (r *registry) forgetOwnerIfUnused(ctx actor.Context, o *owner, alive bool) {
	if len(o.entries) > 0 || len(o.forks) > 0 || o.waiting > 0 {
		return
	}
	delete(r.owners, o.key)
	if alive {
		ctx.Unwatch(o.pid)
	}
}

// shutdown runs when the actor stops or restarts: its state dies with
// it, so every kernel it knows is told to stop (no worker outlives its
// registry, not even one whose start is still under way), every timer is
// stopped, every lease ends and every waiting request is answered.
func (r *registry) shutdown(ctx actor.Context) {
	if r.reapTimer != nil {
		r.reapTimer.Stop()
		r.reapTimer = nil
	}
	r.cancelStart()
	for f := range r.flights {
		f.abandon(ctx.ActorSystem().Root)
	}
	for _, qs := range r.queries {
		for _, q := range qs {
			q.over = true
		}
	}
	gone := fmt.Errorf("%w: %w", ErrUnavailable, errRegistryStopped)
	for _, p := range r.pending {
		for _, w := range p.waiters {
			r.answer(ctx, w.to, &acquireReply{Err: fmt.Errorf("acquire: %w", gone)})
		}
		for _, d := range p.deferred {
			r.answer(ctx, d.to, &resetReply{Err: fmt.Errorf("reset: %w", gone)})
		}
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
		q.answerWaiters(ctx, r, ErrStopFailed)
	}
	for _, to := range r.stopAllWaiters {
		r.answer(ctx, to, &stopAllReply{Err: gone})
	}
	*r = *newRegistry(r.cfg)
}
