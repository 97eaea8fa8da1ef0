package executecode

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/telemetry"
)

// Snapshot is the aggregate state of the kernel subsystem: counts and the
// settings in effect, never identities, keys, paths or payload.
type Snapshot = introspect.Snapshot

// SnapshotCapacity counts live kernels against the strict cap.
type SnapshotCapacity = introspect.Capacity

// SnapshotReap is the idle reaping in effect.
type SnapshotReap = introspect.Reap

// Snapshot reads the aggregate from the introspect actor, which asks the
// registry; before any session has run it is the configuration with zero
// counts. Taking it never holds up a running cell.
func (r *Runtime) Snapshot(ctx context.Context) (Snapshot, error) {
	r.mu.Lock()
	tree, closed := r.tree, r.closed
	r.mu.Unlock()
	if closed {
		return Snapshot{}, ErrClosed
	}
	if tree == nil {
		s := introspect.Empty(introspect.Settings{
			MaxLiveKernels: r.cfg.MaxLiveKernels, IdleTimeout: r.cfg.KernelIdleTimeout(),
			ReapInterval: r.reapInterval, QueueCapacity: r.cfg.MaxQueuedCellsPerKernel,
		})
		s.DroppedLateOutputBytes = r.journal.DroppedLateOutputBytes()
		s.Sandbox = r.sandbox.status()
		s.WarmInterpreters = r.spawner.Warm()
		return s, nil
	}
	s, err := tree.Introspect.Snapshot(ctx)
	s.Sandbox = r.sandbox.status()
	s.WarmInterpreters = r.spawner.Warm()
	if err == nil {
		s.Nodes, err = r.clusterNodes(ctx)
	}
	return s, err
}

// Lifecycle returns the most recent python_repl_lifecycle_observed
// entries, oldest first: one per python_repl event (kernel starts, stops,
// crashes, reaps and evictions, cell starts, stops and cancels,
// fallbacks, bridge denials), each only counts, durations and reasons
// from fixed lists.
func (r *Runtime) Lifecycle() []introspect.Entry { return r.journal.Entries() }

// Metrics is the runtime's Prometheus collector: counters and histograms
// over its events and helper round trips, gauges from its snapshot.
// Register it with a registry of the host's (one runtime per registry,
// or wrap it with prometheus.WrapRegistererWith to tell runtimes apart).
func (r *Runtime) Metrics() prometheus.Collector { return r.metrics }

// observe builds the runtime's event pipeline: its bus, the journal, the
// metrics and the host's bus.
func (r *Runtime) observe() {
	r.bus = &telemetry.Bus{}
	r.journal = introspect.NewJournal(r.journalSize)
	r.metrics = introspect.NewMetrics(r.Snapshot, r.dropped)
	r.bus.Subscribe(r.journal)
	r.bus.Subscribe(r.metrics)
	if r.userBus != nil {
		r.bus.Subscribe(telemetry.Forward{To: r.userBus})
	}
}

// dropped counts the events neither bus could deliver.
func (r *Runtime) dropped() uint64 { return r.bus.Dropped() + r.userBus.Dropped() }

// bridgeDenied is a session bridge's OnAuthFailure.
func (r *Runtime) bridgeDenied() { r.bus.Emit(telemetry.BridgeDeny{}) }
