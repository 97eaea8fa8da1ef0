package registry

import "github.com/asynkron/protoactor-go/actor"

// onSnapshot asks every live kernel for its status, without blocking the
// registry, and answers with the counts as they are when the last answer
// comes.
func (r *registry) onSnapshot(ctx actor.Context, to replyTo) {
	es := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		es = append(es, e)
	}
	r.statuses(ctx, es, func(sts map[*entry]workerStatus) { r.answer(ctx, to, r.snapshot(sts)) })
}

// snapshot counts exactly what is live now (docs/architecture.md,
// Snapshot). A kernel whose start is in flight counts as live and starting, since it
// holds a slot under the cap; so does one started after the statuses
// were asked.
func (r *registry) snapshot(sts map[*entry]workerStatus) *Snapshot {
	phases := make(map[string]int, len(Phases))
	for _, p := range Phases {
		phases[p] = 0
	}
	phases[string(phaseStarting)] = r.starts
	phases[string(phaseUnreachable)] = len(r.stopping)
	queued, deepest := 0, 0
	for _, e := range r.entries {
		st, ok := sts[e]
		if !ok {
			st.phase = phaseStarting
		}
		phases[string(st.phase)]++
		if st.phase != phaseUnreachable {
			queued += st.queueDepth
			deepest = max(deepest, st.queueDepth)
		}
	}
	live := r.live()
	s := &Snapshot{
		Live:          live,
		Max:           r.effMax,
		Available:     max(r.effMax-live, 0),
		Phases:        phases,
		InflightCells: len(r.leases),
		QueuedCells:   queued,
		DeepestQueue:  deepest,
		IdleTimeout:   r.effIdle,
		ReapInterval:  r.cfg.ReapInterval,
	}
	for _, o := range r.owners {
		if len(o.entries) > 0 {
			s.Owners++
		}
		if len(o.forks) > 0 {
			s.ForkedOwners++
		}
	}
	return s
}
