package registry

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/kernelworker"
)

// Worker phases (docs/architecture.md, Phases), and the registry's name for
// a worker whose status is invalid or that does not answer.
const (
	phaseStarting   = kernelworker.PhaseStarting
	phaseIdle       = kernelworker.PhaseIdle
	phaseRunning    = kernelworker.PhaseRunning
	phaseCancelling = kernelworker.PhaseCancelling
	phaseStopping   = kernelworker.PhaseStopping
	// phaseUnreachable is the snapshot's phase of a kernel whose status is
	// invalid or missing, and of every kernel still stopping.
	phaseUnreachable kernelworker.Phase = "unreachable"
)

// Phases are the keys of Snapshot.Phases, always all present: every worker
// phase, then "unreachable".
var Phases = func() []string {
	out := make([]string, 0, len(kernelworker.Phases)+1)
	for _, p := range kernelworker.Phases {
		out = append(out, string(p))
	}
	return append(out, string(phaseUnreachable))
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

// statusQuery is a status request in flight. Its answer comes back as
// a continuation of the registry (RequestFuture + ReenterAfter), so the
// registry never waits for a worker. A worker that stops before answering
// (its mailbox drops the request) resolves the query at once: the
// registry watches every worker it started, and its Terminated answers
// every query to it with unreachable instead of leaving them to
// StatusTimeout. Whichever comes second is ignored.
type statusQuery struct {
	entry *entry
	done  func(workerStatus)
	over  bool
}

// queryStatus asks e's worker for its status, bounded by StatusTimeout,
// and calls done with the validated answer, inside the actor.
func (r *registry) queryStatus(ctx actor.Context, e *entry, done func(workerStatus)) {
	q := &statusQuery{entry: e, done: done}
	wk := pidKey(e.pid)
	r.queries[wk] = append(r.queries[wk], q)
	// An unknown PID yields the dead-letter process, which answers a
	// request with DeadLetterResponse: the future fails at once.
	f := ctx.RequestFuture(e.pid, &kernelworker.StatusRequest{}, r.cfg.StatusTimeout)
	ctx.ReenterAfter(f, func(res any, err error) {
		if err != nil {
			res = nil
		}
		r.resolve(q, validate(res, e))
	})
}

func (r *registry) resolve(q *statusQuery, st workerStatus) {
	if q.over {
		return
	}
	q.over = true
	wk := pidKey(q.entry.pid)
	qs := r.queries[wk]
	for i, x := range qs {
		if x == q {
			qs = append(qs[:i], qs[i+1:]...)
			break
		}
	}
	if len(qs) == 0 {
		delete(r.queries, wk)
	} else {
		r.queries[wk] = qs
	}
	q.done(st)
}

// resolveGone answers every query to a worker that terminated.
func (r *registry) resolveGone(wk string) {
	for _, q := range append([]*statusQuery(nil), r.queries[wk]...) {
		r.resolve(q, workerStatus{phase: phaseUnreachable})
	}
}

// statuses asks several workers at once, so a slow one costs one
// StatusTimeout, not one per worker, and calls done with every answer.
func (r *registry) statuses(ctx actor.Context, es []*entry, done func(map[*entry]workerStatus)) {
	out := make(map[*entry]workerStatus, len(es))
	if len(es) == 0 {
		done(out)
		return
	}
	left := len(es)
	for _, e := range es {
		r.queryStatus(ctx, e, func(st workerStatus) {
			out[e] = st
			if left--; left == 0 {
				done(out)
			}
		})
	}
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
