package introspect

import (
	"slices"
	"time"

	"github.com/executecode/executecode/registry"
)

// Snapshot is the aggregate state of the kernel subsystem
// (docs/architecture.md, Snapshot): exact counts and the settings in effect,
// never identities, keys, paths, PIDs or payload.
type Snapshot struct {
	Capacity Capacity `json:"capacity"`
	// Phases counts live kernels by validated status, plus "unreachable"
	// for invalid statuses and every kernel still stopping.
	Phases map[string]int `json:"phases"`
	// InflightCells counts calls holding a kernel: queued and active.
	InflightCells int    `json:"inflight_cells"`
	Queues        Queues `json:"queues"`
	// Owners counts sessions holding at least one kernel; ForkedOwners
	// those that reset a shared kernel onto one of their own.
	Owners       int  `json:"owners"`
	ForkedOwners int  `json:"forked_owners"`
	Reap         Reap `json:"reap"`
	// DroppedLateOutputBytes totals the output that threads of earlier
	// cells wrote during later ones, dropped as late output.
	DroppedLateOutputBytes int64 `json:"dropped_late_output_bytes"`
	// Sandbox is the protections every new interpreter is confined with;
	// the zero value (all false) when the sandbox is off.
	Sandbox Sandbox `json:"sandbox"`
	// WarmInterpreters counts the interpreters started ahead that wait
	// for a run now (warm_interpreters).
	WarmInterpreters int `json:"warm_interpreters"`
	// Nodes are a cluster session side's nodes (docs/cluster.md), the
	// local one first: each one's capacity and live kernels, never its
	// address or its sessions. Absent outside a cluster.
	Nodes []Node `json:"nodes,omitempty"`
}

// Node is one node of a cluster as the snapshot shows it.
type Node struct {
	Local    bool `json:"local,omitempty"`
	Capacity int  `json:"capacity"`
	Kernels  int  `json:"kernels"`
	// Address is the node's host:port, for the operator's metrics only:
	// the snapshot a host may show to anyone never carries it.
	Address string `json:"-"`
}

// Sandbox is the protections an interpreter runs under: the Landlock ABI
// its rules were made for (0: none), its filesystem confined to its
// rules, no network (TCP by Landlock, every other socket by seccomp),
// signals and abstract Unix sockets scoped to its own domain, and the
// seccomp filter installed.
type Sandbox struct {
	ABI     int  `json:"abi"`
	FS      bool `json:"fs"`
	Net     bool `json:"net"`
	Scoped  bool `json:"scoped"`
	Seccomp bool `json:"seccomp"`
}

// Capacity counts live kernels against the strict cap.
type Capacity struct {
	Live      int `json:"live"`
	Max       int `json:"max"`
	Available int `json:"available"`
}

// Queues are the cells waiting behind active cells.
type Queues struct {
	// Queued is the total over every kernel, Deepest the longest queue
	// of one kernel, Capacity the per-kernel bound in effect.
	Queued   int `json:"queued"`
	Deepest  int `json:"deepest"`
	Capacity int `json:"capacity"`
}

// Reap is the idle reaping in effect. A negative IdleTimeoutMS means
// kernels are not reaped for idleness.
type Reap struct {
	IdleTimeoutMS int64 `json:"idle_timeout_ms"`
	IntervalMS    int64 `json:"interval_ms"`
}

// Phases are the keys of Snapshot.Phases, always all present: the
// registry's (every worker phase, then "unreachable").
var Phases = slices.Clone(registry.Phases)

// Settings are the bounds a runtime runs its kernels with: what a
// snapshot reports before the registry has seen any request.
type Settings struct {
	MaxLiveKernels int
	IdleTimeout    time.Duration
	ReapInterval   time.Duration
	QueueCapacity  int
}

// Empty is the snapshot of a runtime that has no kernel subsystem yet:
// the settings with zero counts.
func Empty(s Settings) Snapshot {
	return Snapshot{
		Capacity: Capacity{Max: s.MaxLiveKernels, Available: max(s.MaxLiveKernels, 0)},
		Phases:   zeroPhases(),
		Queues:   Queues{Capacity: s.QueueCapacity},
		Reap:     Reap{IdleTimeoutMS: s.IdleTimeout.Milliseconds(), IntervalMS: s.ReapInterval.Milliseconds()},
	}
}

func zeroPhases() map[string]int {
	m := make(map[string]int, len(Phases))
	for _, p := range Phases {
		m[p] = 0
	}
	return m
}

// fromRegistry builds a snapshot from the registry's aggregate.
func fromRegistry(s *registry.Snapshot, queueCapacity int, droppedLate int64) Snapshot {
	out := Snapshot{
		Capacity:      Capacity{Live: s.Live, Max: s.Max, Available: s.Available},
		Phases:        zeroPhases(),
		InflightCells: s.InflightCells,
		Queues:        Queues{Queued: s.QueuedCells, Deepest: s.DeepestQueue, Capacity: queueCapacity},
		Owners:        s.Owners,
		ForkedOwners:  s.ForkedOwners,
		Reap:          Reap{IdleTimeoutMS: s.IdleTimeout.Milliseconds(), IntervalMS: s.ReapInterval.Milliseconds()},

		DroppedLateOutputBytes: droppedLate,
	}
	for _, p := range Phases {
		out.Phases[p] = s.Phases[p]
	}
	return out
}
