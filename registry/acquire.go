package registry

import (
	"context"
	"errors"
	"fmt"
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

// onAcquire finds or starts the kernel of a key (docs/architecture.md,
// Acquire and admission). Acquires are serialized by the actor, so
// concurrent first uses of a key start exactly one worker: the first
// starts it, the others find it starting and join it.
func (r *registry) onAcquire(ctx actor.Context, m *Acquire) *AcquireReply {
	maxLive, idle, err := r.bounds(m)
	if err != nil {
		return &AcquireReply{Err: err}
	}
	if err := context.Cause(m.Caller); err != nil {
		return &AcquireReply{Err: fmt.Errorf("acquire: caller gone: %w", err)}
	}
	r.effMax, r.effIdle = maxLive, idle
	digest := m.Key.Digest()
	ekey, forked := r.effectiveKey(digest, m.Owner)

	if e, ok := r.entries[ekey]; ok {
		if r.status(ctx, e).attachable() {
			o := r.attach(ctx, e, m.Owner)
			e.idleTimeout = idle
			l := r.checkout(ctx, e, o, m.Caller)
			r.ensureReap(ctx)
			return &AcquireReply{Allocation: allocation(e, l, true)}
		}
		r.stopEntry(ctx, e, telemetry.StopShutdown, workerShutdown)
	}

	if err := r.admit(ctx, maxLive); err != nil {
		return &AcquireReply{Err: err}
	}
	e, err := r.start(ctx, m, ekey, forked, maxLive, idle)
	if err != nil {
		return &AcquireReply{Err: err}
	}
	o := r.attach(ctx, e, m.Owner)
	l := r.checkout(ctx, e, o, m.Caller)
	r.emit(telemetry.SessionStart{LiveKernels: len(r.entries), Capacity: maxLive})
	r.ensureReap(ctx)
	return &AcquireReply{Allocation: allocation(e, l, false)}
}

func allocation(e *entry, l *lease, reused bool) Allocation {
	return Allocation{Worker: e.pid, Bells: e.bells, Workspace: e.workspace, Generation: e.generation, Reused: reused, Lease: l.public()}
}

// bounds checks a request and resolves its bounds against the defaults.
func (r *registry) bounds(m *Acquire) (maxLive int, idle time.Duration, err error) {
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

// admit makes room for one more kernel under maxLive.
// Only kernels without a lease are candidates, least recently used first;
// a candidate that is not attachable is stopped (it frees its slot), a
// quiescent one is evicted, and one still starting or busy is passed
// over. A lease exists for every call in flight, so such candidates are
// rare and the walk stops at the first usable one: admission does not
// grow with the number of live kernels.
func (r *registry) admit(ctx actor.Context, maxLive int) error {
	live := len(r.entries)
	switch {
	case live < maxLive:
		return nil
	case live > maxLive:
		return fmt.Errorf("acquire: %d live kernels over a cap of %d: %w", live, maxLive, ErrCapacityExhausted)
	}
	for e := r.idle.oldest; e != nil; {
		next := e.newer
		st := r.status(ctx, e)
		switch {
		case !st.attachable():
			r.stopEntry(ctx, e, telemetry.StopShutdown, workerShutdown)
			return nil
		case st.quiescent():
			idleFor := r.cfg.Now().Sub(e.lastUse)
			r.stopEntry(ctx, e, telemetry.StopCapacityEviction, workerEvicted)
			r.emit(telemetry.SessionEvict{Idle: idleFor, LiveKernels: len(r.entries), Capacity: maxLive})
			return nil
		}
		e = next
	}
	return fmt.Errorf("acquire: %d live kernels, none idle: %w", live, ErrCapacityExhausted)
}

// start boots a new kernel. Only a successful start consumes a
// generation (docs/architecture.md, Leases and generations).
func (r *registry) start(ctx actor.Context, m *Acquire, ekey string, forked bool, maxLive int, idle time.Duration) (*entry, error) {
	gen := r.nextGeneration
	var h kernelworker.Handle
	err := errors.New("no starter configured")
	if r.cfg.Starter != nil {
		h, err = r.cfg.Starter(ctx, m.Key, gen, m.Worker)
		if err == nil && h.PID == nil {
			err = errors.New("starter returned no worker")
		}
	}
	if err != nil {
		r.emit(telemetry.SessionCrash{LiveKernels: len(r.entries), Capacity: maxLive, Reason: telemetry.CrashStartupFailure})
		return nil, fmt.Errorf("acquire: %w: %w", ErrStartupFailed, err)
	}
	r.nextGeneration++
	ctx.Watch(h.PID)
	now := r.cfg.Now()
	e := &entry{
		ekey: ekey, key: m.Key, pid: h.PID, bells: h.Bells, workspace: h.Workspace, generation: gen,
		owners: map[string]*owner{}, leases: map[uint64]*lease{},
		lastUse: now, startedAt: now, idleTimeout: idle, capacity: maxLive,
	}
	if forked {
		e.forkOwner = pidKey(m.Owner)
	}
	r.entries[ekey] = e
	r.workers[pidKey(h.PID)] = e
	return e, nil
}
