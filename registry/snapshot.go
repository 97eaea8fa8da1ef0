package registry

import "github.com/asynkron/protoactor-go/actor"

// snapshot counts exactly what is live now (docs/architecture.md,
// Snapshot).
func (r *registry) snapshot(ctx actor.Context) *Snapshot {
	phases := make(map[string]int, len(Phases))
	for _, p := range Phases {
		phases[p] = 0
	}
	phases[string(phaseUnreachable)] = len(r.stopping)
	es := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		es = append(es, e)
	}
	queued, deepest := 0, 0
	for _, st := range r.statuses(ctx, es) {
		phases[string(st.phase)]++
		if st.phase != phaseUnreachable {
			queued += st.queueDepth
			deepest = max(deepest, st.queueDepth)
		}
	}
	s := &Snapshot{
		Live:          len(r.entries),
		Max:           r.effMax,
		Available:     max(r.effMax-len(r.entries), 0),
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
