package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

// Names of the two kinds of effective key: a base kernel is keyed by its
// key's digest, an owner's fork by the digest and the owner.
func baseKey(digest string) string           { return "b\x00" + digest }
func forkKey(digest, ownerKey string) string { return "f\x00" + digest + "\x00" + ownerKey }

// effectiveKey is the kernel an owner's acquire of digest goes to: its
// fork once it has reset a shared kernel, else the base kernel.
func (r *registry) effectiveKey(digest string, ownerPID *actor.PID) (ekey string, forked bool) {
	if o, ok := r.owners[pidKey(ownerPID)]; ok {
		if _, f := o.forks[digest]; f {
			return forkKey(digest, o.key), true
		}
	}
	return baseKey(digest), false
}

// pending is an acquire that waits: on the status of its key's kernel
// (is it still attachable?), on the status of an eviction candidate, or
// on the start of a new kernel. The registry keeps serving meanwhile.
// Acquires of the same effective key that arrive meanwhile join it as
// waiters, so concurrent first uses of a key start exactly one worker,
// and a Reset of the key waits until it is over, as if it had arrived
// after. A start in flight holds a slot under the cap.
type pending struct {
	ekey      string
	key       Key
	forkOwner string
	// The bounds and worker options of the first acquire: a new kernel
	// is started with them.
	maxLive int
	idle    time.Duration
	opts    WorkerOptions
	waiters []*waiter
	// passed are the eviction candidates this admission found busy.
	passed map[*entry]bool
	// starting: the kernel's start is in flight, with generation gen.
	starting bool
	gen      uint64
	// stopAll: StopAll arrived during the start; the kernel is stopped
	// as soon as it is up.
	stopAll  bool
	deferred []deferredReset
}

// waiter is one acquire of a pending, answered when it resolves.
type waiter struct {
	to     replyTo
	owner  *owner
	caller context.Context
	idle   time.Duration
	// gone: the owner detached or died while the acquire waited.
	gone bool
}

type deferredReset struct {
	m  *resetMsg
	to replyTo
}

// onAcquire reuses the key's kernel when its status says it is
// attachable, else admits and starts a new one. It answers at once when
// it can; otherwise the acquire becomes a pending that resolves on a
// later message.
func (r *registry) onAcquire(ctx actor.Context, m *acquireMsg, to replyTo) {
	maxLive, idle, err := r.bounds(m)
	if err != nil {
		r.answer(ctx, to, &acquireReply{Err: err})
		return
	}
	if err := context.Cause(m.Caller); err != nil {
		r.answer(ctx, to, &acquireReply{Err: fmt.Errorf("acquire: caller gone: %w", err)})
		return
	}
	r.effMax, r.effIdle = maxLive, idle
	ekey, forked := r.effectiveKey(m.Key.Digest(), m.Owner)
	w := &waiter{to: to, owner: r.ensureOwner(ctx, m.Owner), caller: m.Caller, idle: idle}
	w.owner.waiting++
	if p, ok := r.pending[ekey]; ok {
		p.waiters = append(p.waiters, w)
		return
	}
	p := &pending{ekey: ekey, key: m.Key, maxLive: maxLive, idle: idle, opts: m.Worker, waiters: []*waiter{w}}
	if forked {
		p.forkOwner = pidKey(m.Owner)
	}
	r.pending[ekey] = p
	if e, ok := r.entries[ekey]; ok {
		if e.view != nil {
			// The status the worker published after its last message is
			// what it would answer now, less the messages still in its
			// mailbox, whose effects race with this acquire either way;
			// it saves every reused cell a round trip to the worker.
			r.onChecked(ctx, p, e, validate(e.view.Load(), e))
			return
		}
		r.queryStatus(ctx, e, func(st workerStatus) { r.onChecked(ctx, p, e, st) })
		return
	}
	r.admit(ctx, p, r.idle.oldest)
}

// current reports whether p is still the pending of its key: StopAll, an
// owner's departure or the registry's shutdown may have ended it while
// it waited.
func (r *registry) current(p *pending) bool { return r.pending[p.ekey] == p }

// onChecked: the key's kernel answered its status. An attachable kernel
// is handed out; one that is not is stopped, and a new one admitted.
func (r *registry) onChecked(ctx actor.Context, p *pending, e *entry, st workerStatus) {
	if !r.current(p) {
		return
	}
	if r.entries[p.ekey] == e {
		if st.attachable() {
			r.handOut(ctx, p, e, true)
			return
		}
		r.stopEntry(ctx, e, telemetry.StopShutdown, workerShutdown)
	}
	r.admit(ctx, p, r.idle.oldest)
}

// live counts the kernels under the cap, those live and those starting:
// the live count the snapshot and every event report.
func (r *registry) live() int { return len(r.entries) + r.starts }

func allocation(e *entry, l *lease, reused bool) Allocation {
	return Allocation{Worker: e.worker, Bells: e.bells, Workspace: e.workspace, Remote: e.remote, Generation: e.generation, Reused: reused, Lease: l.public()}
}

// bounds checks a request and resolves its bounds against the defaults.
func (r *registry) bounds(m *acquireMsg) (maxLive int, idle time.Duration, err error) {
	switch {
	case m.Owner == nil:
		return 0, 0, fmt.Errorf("acquire: %w: no owner", ErrInvalidRequest)
	case m.Caller == nil:
		return 0, 0, fmt.Errorf("acquire: %w: no caller", ErrInvalidRequest)
	case !m.Key.complete():
		return 0, 0, fmt.Errorf("acquire: %w: incomplete key", ErrInvalidRequest)
	case m.MaxLiveKernels < 0:
		return 0, 0, fmt.Errorf("acquire: %w: negative max_live_kernels", ErrInvalidRequest)
	}
	maxLive, idle = m.MaxLiveKernels, m.IdleTimeout
	if maxLive == 0 {
		maxLive = r.cfg.MaxLiveKernels
	}
	if idle == 0 {
		idle = r.cfg.IdleTimeout
	}
	return maxLive, idle, nil
}

// admit makes room for p's kernel under its cap and starts it. Only kernels without a lease are candidates, least recently
// used first, from c on; a candidate that is not attachable is stopped
// (it frees its slot), a quiescent one is evicted, and one still starting
// or busy is passed over. A lease exists for every call in flight, so
// such candidates are rare and the walk stops at the first usable one:
// admission does not grow with the number of live kernels. Each
// candidate's status is awaited without blocking the registry, and the
// decision is taken on the state when the answer comes.
func (r *registry) admit(ctx actor.Context, p *pending, c *entry) {
	live := r.live()
	switch {
	case live < p.maxLive:
		r.start(ctx, p)
		return
	case live > p.maxLive:
		r.fail(ctx, p, fmt.Errorf("acquire: %d live kernels over a cap of %d: %w", live, p.maxLive, ErrCapacityExhausted))
		return
	}
	for c != nil && p.passed[c] {
		c = c.newer
	}
	if c == nil {
		r.fail(ctx, p, fmt.Errorf("acquire: %d live kernels, none idle: %w", live, ErrCapacityExhausted))
		return
	}
	r.queryStatus(ctx, c, func(st workerStatus) { r.onCandidate(ctx, p, c, st) })
}

func (r *registry) onCandidate(ctx actor.Context, p *pending, c *entry, st workerStatus) {
	if !r.current(p) {
		return
	}
	if r.live() != p.maxLive || r.entries[c.ekey] != c || !c.inIdle {
		// Room was made, or the candidate was taken or stopped, while it
		// answered: decide again on what is there now.
		r.admit(ctx, p, r.idle.oldest)
		return
	}
	switch {
	case !st.attachable():
		r.stopEntry(ctx, c, telemetry.StopShutdown, workerShutdown)
	case st.quiescent():
		idleFor := r.cfg.Now().Sub(c.lastUse)
		r.stopEntry(ctx, c, telemetry.StopCapacityEviction, workerEvicted)
		r.emit(telemetry.SessionEvict{Idle: idleFor, LiveKernels: r.live(), Capacity: p.maxLive})
	default:
		if p.passed == nil {
			p.passed = map[*entry]bool{}
		}
		p.passed[c] = true
		r.admit(ctx, p, c.newer)
		return
	}
	r.start(ctx, p)
}

// flight is a Starter call running on a goroutine of its own. Its result
// reaches the registry in a started message. Should the registry stop
// before it handles that message, shutdown abandons the flight, and
// whichever of the two comes second stops the worker, so no started
// worker is left without a registry.
type flight struct {
	p *pending

	mu        sync.Mutex
	done      bool
	abandoned bool
	h         kernelworker.Handle
	err       error
}

// finish records the Starter's result; false means the registry is gone.
func (f *flight) finish(h kernelworker.Handle, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.h, f.err, f.done = h, err, true
	return !f.abandoned
}

// abandon is the registry's shutdown: a worker already started is
// stopped here, a later one by the flight's goroutine.
func (f *flight) abandon(root *actor.RootContext) {
	f.mu.Lock()
	f.abandoned = true
	done, pid := f.done, f.h.PID
	f.mu.Unlock()
	if done && pid != nil {
		root.Send(pid, &kernelworker.Stop{Reason: workerShutdown})
	}
}

// start boots p's kernel on a goroutine of its own: the Starter may take
// seconds, and the registry answers everything else meanwhile. The
// generation is taken now, so concurrent starts never share one; a start
// that fails gives it back when no later start took one since, so only
// successful starts consume generations while starts do not overlap.
func (r *registry) start(ctx actor.Context, p *pending) {
	p.starting = true
	p.gen = r.nextGeneration
	r.nextGeneration++
	r.starts++
	f := &flight{p: p}
	r.flights[f] = struct{}{}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	starter, sctx, key, gen, opts := r.cfg.Starter, r.startCtx, p.key, p.gen, p.opts
	go func() {
		h, err := runStarter(sctx, starter, key, gen, opts)
		if !f.finish(h, err) {
			if err == nil {
				root.Send(h.PID, &kernelworker.Stop{Reason: workerShutdown})
			}
			return
		}
		root.Send(self, started{flight: f})
	}()
}

// runStarter calls starter on the start goroutine. A Starter that
// panics fails its start, as a panic inside the actor used to fail only
// the actor: it must not take the host down.
func runStarter(ctx context.Context, starter Starter, key Key, gen uint64, opts WorkerOptions) (h kernelworker.Handle, err error) {
	if starter == nil {
		return h, errors.New("no starter configured")
	}
	defer func() {
		if p := recover(); p != nil {
			h, err = kernelworker.Handle{}, fmt.Errorf("starter panicked: %v", p)
		}
	}()
	h, err = starter(ctx, key, gen, opts)
	if err == nil && h.PID == nil {
		err = errors.New("starter returned no worker")
	}
	return h, err
}

// onStarted takes a Starter's result: the new kernel joins the live set
// and is handed to p's waiters.
func (r *registry) onStarted(ctx actor.Context, f *flight) {
	if _, ok := r.flights[f]; !ok {
		return // a flight of an earlier incarnation, abandoned
	}
	delete(r.flights, f)
	r.starts--
	p := f.p
	if f.err != nil {
		if r.nextGeneration == p.gen+1 {
			r.nextGeneration = p.gen
		}
		r.emit(telemetry.SessionCrash{LiveKernels: r.live(), Capacity: p.maxLive, Reason: telemetry.CrashStartupFailure})
		r.fail(ctx, p, fmt.Errorf("acquire: %w: %w", ErrStartupFailed, f.err))
		return
	}
	h := f.h
	ctx.Watch(h.PID)
	now := r.cfg.Now()
	e := &entry{
		ekey: p.ekey, key: p.key, forkOwner: p.forkOwner, pid: h.PID,
		worker: kernelworker.NewClient(ctx.ActorSystem().Root, h.PID), view: h.Status, bells: h.Bells, workspace: h.Workspace, remote: h.Remote,
		generation: p.gen, owners: map[string]*owner{}, leases: map[uint64]*lease{},
		lastUse: now, startedAt: now, idleTimeout: p.idle, capacity: p.maxLive,
	}
	r.entries[p.ekey] = e
	r.workers[pidKey(h.PID)] = e
	r.emit(telemetry.SessionStart{LiveKernels: r.live(), Capacity: p.maxLive})
	r.handOut(ctx, p, e, false)
}

// handOut resolves p with kernel e: every waiter's owner is attached and
// every waiter whose caller is still there gets a lease. A departure that
// arrived while an acquire waited takes effect as if it had come right
// after the answer: the acquire gets its kernel with a lease already
// ended (cause ErrOwnerGone), and a kernel that nobody owns then stops at
// once. A kernel that StopAll caught starting stops at once too, and its
// waiters get ErrShutdown.
func (r *registry) handOut(ctx actor.Context, p *pending, e *entry, reused bool) {
	delete(r.pending, p.ekey)
	for i, w := range p.waiters {
		// Only the first waiter of a new kernel had it started; the
		// others joined a kernel that was already coming up.
		reused := reused || i > 0
		switch {
		case p.stopAll:
			r.answer(ctx, w.to, &acquireReply{Err: fmt.Errorf("acquire: %w", ErrShutdown)})
			r.unwait(ctx, w)
			continue
		case w.gone:
			r.nextLease++
			l := Lease{id: r.nextLease, generation: e.generation, worker: e.pid, ctx: endedContext(ErrOwnerGone)}
			r.answer(ctx, w.to, &acquireReply{Allocation: Allocation{Worker: e.worker, Bells: e.bells,
				Workspace: e.workspace, Remote: e.remote, Generation: e.generation, Reused: reused, Lease: l}})
			continue
		}
		w.owner.waiting--
		r.attach(e, w.owner)
		e.idleTimeout = w.idle
		if err := context.Cause(w.caller); err != nil {
			r.answer(ctx, w.to, &acquireReply{Err: fmt.Errorf("acquire: caller gone: %w", err)})
			continue
		}
		l := r.checkout(ctx, e, w.owner, w.caller)
		r.answer(ctx, w.to, &acquireReply{Allocation: allocation(e, l, reused)})
	}
	switch {
	case p.stopAll:
		r.stopEntry(ctx, e, telemetry.StopShutdown, workerShutdown)
	case len(e.owners) == 0:
		r.stopEntry(ctx, e, telemetry.StopOwnerDetached, workerOwnerGone)
	}
	r.ensureReap(ctx)
	r.runDeferred(ctx, p)
}

// unwait ends a waiter's hold on its owner.
func (r *registry) unwait(ctx actor.Context, w *waiter) {
	if !w.gone {
		w.owner.waiting--
		r.forgetOwnerIfUnused(ctx, w.owner, true)
	}
}

// fail resolves p with err: no kernel.
func (r *registry) fail(ctx actor.Context, p *pending, err error) {
	delete(r.pending, p.ekey)
	for _, w := range p.waiters {
		r.answer(ctx, w.to, &acquireReply{Err: err})
		r.unwait(ctx, w)
	}
	r.runDeferred(ctx, p)
}

// runDeferred handles the resets that waited for p, in their order.
func (r *registry) runDeferred(ctx actor.Context, p *pending) {
	ds := p.deferred
	p.deferred = nil
	for _, d := range ds {
		r.onReset(ctx, d.m, d.to)
	}
}

// dropWaiters marks o's waiting acquires gone: o detached or died. They
// are answered when their pending resolves (see handOut).
func (r *registry) dropWaiters(o *owner) {
	if o.waiting == 0 {
		return
	}
	for _, p := range r.pending {
		for _, w := range p.waiters {
			if w.owner == o && !w.gone {
				w.gone = true
				o.waiting--
			}
		}
	}
}
