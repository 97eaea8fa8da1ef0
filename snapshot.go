package executecode

import (
	"context"

	"github.com/executecode/executecode/registry"
)

// Snapshot is the aggregate state of the kernel subsystem: counts and the
// settings in effect, never identities, keys, paths or payload.
type Snapshot struct {
	Capacity      SnapshotCapacity `json:"capacity"`
	Phases        map[string]int   `json:"phases"`
	InflightCells int              `json:"inflight_cells"`
	Owners        int              `json:"owners"`
	ForkedOwners  int              `json:"forked_owners"`
	Reap          SnapshotReap     `json:"reap"`
}

// SnapshotCapacity counts live kernels against the strict cap.
type SnapshotCapacity struct {
	Live      int `json:"live"`
	Max       int `json:"max"`
	Available int `json:"available"`
}

// SnapshotReap is the idle reaping in effect.
type SnapshotReap struct {
	IdleTimeoutMS int64 `json:"idle_timeout_ms"`
	IntervalMS    int64 `json:"interval_ms"`
}

var phaseNames = []string{"starting", "idle", "running", "cancelling", "stopping", "unreachable"}

// Snapshot reads the registry's aggregate; before any session has run it
// is the configuration with zero counts.
func (r *Runtime) Snapshot(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{
		Capacity: SnapshotCapacity{Max: r.cfg.MaxLiveKernels, Available: r.cfg.MaxLiveKernels},
		Phases:   map[string]int{},
		Reap:     SnapshotReap{IdleTimeoutMS: r.cfg.KernelIdleTimeout().Milliseconds(), IntervalMS: reapInterval.Milliseconds()},
	}
	for _, p := range phaseNames {
		snap.Phases[p] = 0
	}
	r.mu.Lock()
	tree := r.tree
	r.mu.Unlock()
	if tree == nil {
		return snap, nil
	}
	s, err := request[*registry.Snapshot](ctx, tree, &registry.SnapshotRequest{})
	if err != nil {
		return snap, err
	}
	snap.Capacity = SnapshotCapacity{Live: s.Live, Max: s.Max, Available: s.Available}
	for p, n := range s.Phases {
		snap.Phases[p] = n
	}
	snap.InflightCells, snap.Owners, snap.ForkedOwners = s.InflightCells, s.Owners, s.ForkedOwners
	snap.Reap = SnapshotReap{IdleTimeoutMS: s.IdleTimeout.Milliseconds(), IntervalMS: s.ReapInterval.Milliseconds()}
	return snap, nil
}
