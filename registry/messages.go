package registry

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/pump"
)

// Requests are sent with protoactor request/response (RequestFuture);
// each is answered with its *Reply. Pointer and value forms are both
// accepted.

// Acquire checks out a kernel for Key on behalf of Owner, starting one if
// needed. Caller is the calling operation: when it is
// done, the lease ends. MaxLiveKernels and IdleTimeout are this request's
// bounds; zero takes the registry's. A negative IdleTimeout means never.
type Acquire struct {
	Key            Key
	Owner          *actor.PID
	Caller         context.Context
	MaxLiveKernels int
	IdleTimeout    time.Duration
	Worker         WorkerOptions
}

// AcquireReply carries the allocation, or Err (ErrCapacityExhausted,
// ErrStartupFailed, ErrInvalidRequest, or the caller's cancellation).
type AcquireReply struct {
	Allocation Allocation
	Err        error
}

// Allocation is a checked-out kernel.
type Allocation struct {
	Worker *actor.PID
	Bells  *pump.Bells
	// Workspace is the kernel's private workspace (kernelworker.Handle).
	Workspace  string
	Generation uint64
	Reused     bool
	Lease      Lease
}

// Release ends a lease. Releasing twice, or releasing a lease whose
// kernel is gone, succeeds; a lease the registry never issued fails with
// ErrInvalidLease.
type Release struct{ Lease Lease }

// ReleaseReply answers Release.
type ReleaseReply struct{ Err error }

// Reset discards Owner's state for Key: a kernel the
// owner alone holds (or its fork) is stopped, and the answer comes once
// its worker is gone; a co-owner is moved to a fork of its own, so only
// it starts afresh.
type Reset struct {
	Key   Key
	Owner *actor.PID
}

// ResetReply: Performed says some state was discarded, Forked that the
// owner's next acquires of Key go to its own fork. Err is ErrStopFailed
// when the old worker could not be confirmed gone.
type ResetReply struct {
	Performed bool
	Forked    bool
	Err       error
}

// Detach removes Owner from every kernel and forgets its forks,
// exactly as Owner's death does.
type Detach struct{ Owner *actor.PID }

// DetachReply answers Detach.
type DetachReply struct{}

// StopAll stops every live kernel as a shutdown (its session.stop has
// reason shutdown) and answers StopAllReply once no kernel is left
// stopping, or every one left failed to stop in time. A host sends it
// before it stops the tree, whose own stop ends workers without a stop
// event.
type StopAll struct{}

// StopAllReply answers StopAll; Err is ErrStopFailed when some worker did
// not stop within the stop timeout.
type StopAllReply struct{ Err error }

// SnapshotRequest asks for a Snapshot.
type SnapshotRequest struct{}

// Snapshot is the aggregate state (docs/architecture.md, Snapshot): exact
// counts and the settings in effect, no identities. Max and IdleTimeout
// are those of the most recent acquire (the registry's configuration
// before any); a negative IdleTimeout means kernels are not reaped for
// idleness. Phases counts live kernels by validated status, plus
// "unreachable" for invalid statuses and every kernel still stopping.
type Snapshot struct {
	Live          int
	Max           int
	Available     int
	Phases        map[string]int
	InflightCells int
	// QueuedCells is the number of cells waiting behind an active cell,
	// over every kernel with a valid status; DeepestQueue the longest
	// such queue.
	QueuedCells  int
	DeepestQueue int
	Owners       int
	ForkedOwners int
	IdleTimeout  time.Duration
	ReapInterval time.Duration
}

// Messages the actor sends itself from timers and AfterFuncs.
type (
	callerDone  struct{ lease uint64 }
	reapTick    struct{ token uint64 }
	reapIdle    struct{} // reap once without rescheduling (tests)
	stopExpired struct {
		worker string
		token  uint64
	}
)
