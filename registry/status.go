package registry

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/kernelworker"
)

// Worker phases (docs/architecture.md, Phases), and the registry's name for
// a worker
// whose status is invalid or that does not answer.
const (
	phaseStarting    = kernelworker.PhaseStarting
	phaseIdle        = kernelworker.PhaseIdle
	phaseRunning     = kernelworker.PhaseRunning
	phaseCancelling  = kernelworker.PhaseCancelling
	phaseStopping    = kernelworker.PhaseStopping
	phaseUnreachable = PhaseUnreachable
)

// PhaseUnreachable is the snapshot's phase of a kernel whose status is
// invalid or missing, and of every kernel still stopping.
const PhaseUnreachable kernelworker.Phase = "unreachable"

// Phases are the keys of Snapshot.Phases, always all present: every worker
// phase, then PhaseUnreachable.
var Phases = func() []string {
	out := make([]string, 0, len(kernelworker.Phases)+1)
	for _, p := range kernelworker.Phases {
		out = append(out, string(p))
	}
	return append(out, string(PhaseUnreachable))
}()

// workerStatus is a validated status (docs/architecture.md, Worker status).
type workerStatus struct {
	phase      kernelworker.Phase // phaseUnreachable when invalid
	queueDepth int
	active     string
}

// attachable: a new call may join the kernel.
func (s workerStatus) attachable() bool {
	return s.phase == phaseStarting || s.phase == phaseIdle || s.phase == phaseRunning
}

// quiescent: nothing runs or waits.
func (s workerStatus) quiescent() bool {
	return s.phase == phaseIdle && s.queueDepth == 0 && s.active == ""
}

// statusQuery is a status request in flight. Its reply address is a
// process of its own that also watches the worker, so a worker that
// stops before answering (its mailbox drops the request) resolves the
// query at once with Terminated instead of holding the registry for
// StatusTimeout. Anything arriving after the first answer is dropped.
type statusQuery struct {
	sys      *actor.ActorSystem
	worker   *actor.PID
	proc     actor.Process // the worker's
	reply    *actor.PID
	answers  chan any
	deadline time.Time
}

// replyProcess is a mailbox of one for a statusQuery.
type replyProcess struct{ answers chan any }

func (p replyProcess) SendUserMessage(_ *actor.PID, m any) {
	_, msg, _ := actor.UnwrapEnvelope(m)
	p.offer(msg)
}

func (p replyProcess) SendSystemMessage(_ *actor.PID, m any) { p.offer(m) }

func (p replyProcess) Stop(*actor.PID) {}

func (p replyProcess) offer(m any) {
	select {
	case p.answers <- m:
	default:
	}
}

// queryStatus asks a worker for its status without waiting for the
// answer; read validates it.
func (r *registry) queryStatus(ctx actor.Context, e *entry) *statusQuery {
	sys := ctx.ActorSystem()
	q := &statusQuery{sys: sys, worker: e.pid, answers: make(chan any, 1),
		deadline: time.Now().Add(r.cfg.StatusTimeout)}
	q.reply, _ = sys.ProcessRegistry.Add(replyProcess{answers: q.answers}, "registry-status"+sys.ProcessRegistry.NextId())
	// An unknown PID yields the dead-letter process, which answers a
	// watch with Terminated and a request with DeadLetterResponse.
	q.proc, _ = sys.ProcessRegistry.Get(e.pid)
	q.proc.SendSystemMessage(e.pid, &actor.Watch{Watcher: q.reply})
	ctx.RequestWithCustomSender(e.pid, &kernelworker.StatusRequest{}, q.reply)
	return q
}

func (q *statusQuery) read(e *entry) workerStatus {
	t := time.NewTimer(time.Until(q.deadline))
	var res any
	select {
	case res = <-q.answers:
	case <-t.C:
	}
	t.Stop()
	q.proc.SendSystemMessage(q.worker, &actor.Unwatch{Watcher: q.reply})
	q.sys.ProcessRegistry.Remove(q.reply)
	return validate(res, e)
}

// status asks one worker, bounded by StatusTimeout.
func (r *registry) status(ctx actor.Context, e *entry) workerStatus {
	return r.queryStatus(ctx, e).read(e)
}

// statuses asks several workers at once, so a slow one costs one
// StatusTimeout, not one per worker.
func (r *registry) statuses(ctx actor.Context, es []*entry) []workerStatus {
	qs := make([]*statusQuery, len(es))
	for i, e := range es {
		qs[i] = r.queryStatus(ctx, e)
	}
	out := make([]workerStatus, len(es))
	for i, q := range qs {
		out[i] = q.read(es[i])
	}
	return out
}

// validate accepts a status only from a live process of this entry's
// generation and key, with a known phase consistent with its queue and
// active cell; anything else is unreachable.
func validate(res any, e *entry) workerStatus {
	var st kernelworker.Status
	switch v := res.(type) {
	case *kernelworker.Status:
		if v == nil {
			return workerStatus{phase: phaseUnreachable}
		}
		st = *v
	case kernelworker.Status:
		st = v
	default:
		return workerStatus{phase: phaseUnreachable}
	}
	bad := workerStatus{phase: phaseUnreachable}
	k, ok := st.Key.(Key)
	if !ok {
		if kp, isPtr := st.Key.(*Key); isPtr && kp != nil {
			k, ok = *kp, true
		}
	}
	if !ok || !k.Equal(e.key) || st.Generation != e.generation || !st.ProcessAlive ||
		st.QueueDepth < 0 || st.CellsCompleted < 0 {
		return bad
	}
	switch st.Phase {
	case phaseStarting:
		if st.ActiveRequestID != "" {
			return bad
		}
	case phaseIdle:
		if st.QueueDepth != 0 || st.ActiveRequestID != "" {
			return bad
		}
	case phaseRunning, phaseCancelling:
		if st.ActiveRequestID == "" {
			return bad
		}
	case phaseStopping:
		// A worker told to stop while idle has no active cell, and that is
		// still a valid status.
	default:
		return bad
	}
	return workerStatus{phase: st.Phase, queueDepth: st.QueueDepth, active: st.ActiveRequestID}
}
