package registry

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/kernelworker"
)

// Requests are what a Client sends; each is answered with its *Reply, on
// the Client's reply channel, or to the sender of a request sent with
// RequestFuture (the introspect actor's snapshot, tests). Pointer and
// value forms are both accepted.

// replySlot is a request's reply channel, set by the Client.
type replySlot struct{ reply chan<- any }

func (s *replySlot) setReply(ch chan<- any) { s.reply = ch }
func (s replySlot) replyChan() chan<- any   { return s.reply }

// acquireMsg checks out a kernel for Key on behalf of Owner, starting one if
// needed (docs/architecture.md, Acquire and admission). Caller is the calling operation: when it is
// done, the lease ends. MaxLiveKernels and IdleTimeout are this request's
// bounds; zero takes the registry's. A negative IdleTimeout means never.
type acquireMsg struct {
	replySlot
	Key            Key
	Owner          *actor.PID
	Caller         context.Context
	MaxLiveKernels int
	IdleTimeout    time.Duration
	Worker         WorkerOptions
}

// acquireReply carries the allocation, or Err (ErrCapacityExhausted,
// ErrStartupFailed, ErrInvalidRequest, or the caller's cancellation).
type acquireReply struct {
	Allocation Allocation
	Err        error
}

// Allocation is a checked-out kernel.
type Allocation struct {
	Worker kernelworker.Client
	Bells  *bell.Pair
	// Workspace is the kernel's private workspace (kernelworker.Handle).
	Workspace string
	// Remote is kernelworker.Handle's: the kernel runs on another node.
	Remote     bool
	Generation uint64
	Reused     bool
	Lease      Lease
}

// releaseMsg ends a lease. Releasing twice, or releasing a lease whose
// kernel is gone, succeeds; a lease the registry never issued fails with
// ErrInvalidLease.
type releaseMsg struct {
	replySlot
	Lease Lease
}

// releaseReply answers Release.
type releaseReply struct{ Err error }

// resetMsg discards Owner's state for Key (docs/architecture.md, Reset and
// forks): a kernel the owner alone holds (or its fork) is stopped, and the
// answer comes once its worker is gone; a co-owner is moved to a fork of its
// own, so only it starts afresh.
type resetMsg struct {
	replySlot
	Key   Key
	Owner *actor.PID
}

// resetReply: Performed says some state was discarded, Forked that the
// owner's next acquires of Key go to its own fork. Err is ErrStopFailed
// when the old worker could not be confirmed gone.
type resetReply struct {
	Performed bool
	Forked    bool
	Err       error
}

// detachMsg removes Owner from every kernel and forgets its forks, exactly
// as Owner's death does (docs/architecture.md, Owner departure).
type detachMsg struct {
	replySlot
	Owner *actor.PID
}

// detachReply answers Detach.
type detachReply struct{}

// stopAllMsg stops every live kernel as a shutdown (its session.stop has
// reason shutdown) and answers stopAllReply once no kernel is left
// stopping, or every one left failed to stop in time. A host sends it
// before it stops the tree, whose own stop ends workers without a stop
// event.
type stopAllMsg struct{ replySlot }

// stopAllReply answers StopAll; Err is ErrStopFailed when some worker did
// not stop within the stop timeout.
type stopAllReply struct{ Err error }

// SnapshotRequest asks for a Snapshot.
type SnapshotRequest struct{ replySlot }

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

// Messages the actor sends itself from timers, AfterFuncs and Starter
// goroutines.
type (
	started     struct{ flight *flight }
	callerDone  struct{ lease uint64 }
	reapTick    struct{ token uint64 }
	reapIdle    struct{} // reap once without rescheduling (tests)
	stopExpired struct {
		worker string
		token  uint64
	}
)
