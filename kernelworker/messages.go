package kernelworker

import (
	"context"
	"time"

	"github.com/executecode/executecode/internal/proc"
)

// Execute asks the worker to run one cell. Send it with Send (not a
// request): the answer is the one CellResult the worker puts on Reply.
type Execute struct {
	// Ctx is the caller. When it is done the cell is abandoned: a queued
	// cell leaves the queue, an active one is cancelled and its kernel
	// discarded. nil means the caller never goes away.
	Ctx context.Context
	// Code is the cell: the helper import line, "\n", then the script.
	Code string
	// Cwd is the cell's working directory; "" means the worker's.
	Cwd string
	// Bridge binds the helpers to this cell's RPC directory; nil runs the
	// cell without helpers.
	Bridge *Bridge
	// Scrub rewrites the cell's host paths and token in its output, its
	// spill and its exception (nil: nothing is replaced). It holds the
	// cell's own patterns (its bridge), since the kernel outlives them.
	Scrub *proc.Scrubber
	// Timeout is the cell timer, armed when the cell is dispatched (queue
	// wait does not count). It must be positive.
	Timeout time.Duration
	// Deadline, when set, is when the cell ends whatever its Timeout: a
	// cell still queued then is answered timeout (nothing of it ran, the
	// kernel keeps its state), and a dispatched one's timer fires then at
	// the latest. It lets a caller whose clock started before the queue
	// leave the timing to the worker instead of racing its timer.
	Deadline time.Time
	// CPUBudget is the CPU time this cell may use, enforced through the
	// kernel's soft RLIMIT_CPU; 0 means Options.Limits.CPUSeconds, and no
	// budget when that is 0 too.
	CPUBudget time.Duration
	// Reply gets exactly one CellResult. It must be buffered (capacity 1):
	// the worker never blocks on it, so callers need not be actors.
	Reply chan<- CellResult
}

// Bridge is a cell's helper binding (docs/protocol.md, How the token
// reaches python).
type Bridge struct {
	Dir, Token   string
	MaxTextBytes int
}

// Reasons of a CellResult (README.md, Session mode); "" is success.
const (
	ReasonException       = "exception"
	ReasonTimeout         = "timeout"
	ReasonQueueFull       = "queue_full"
	ReasonShuttingDown    = "shutting_down"
	ReasonKernelDiscarded = "kernel_discarded"
	ReasonPortExit        = "port_exit"
	ReasonProtocolFault   = "protocol_fault"
	ReasonInterrupted     = "interrupted"
	ReasonStartupFailed   = "startup_failed"
	ReasonInvalidRequest  = "invalid_request"
)

// Values of CellResult.KilledBy and Stop.Reason besides those KilledBy
// derives from an exit status.
const (
	KilledByOwnerGone     = "owner_gone"
	KilledByReset         = "reset"
	KilledByShutdown      = "shutdown"
	KilledByProtocolFault = "protocol_fault"
	KilledByEvicted       = "evicted"
	KilledByIdleReaped    = "idle_reaped"
)

// CellResult is the outcome of one Execute.
type CellResult struct {
	// RequestID is "cell-N" once the cell was dispatched, else "".
	RequestID string
	// Reason is "" on success, else one of the Reason constants.
	Reason string
	// StateRetained says whether the kernel and its namespace survive.
	StateRetained bool
	// Duration runs from the runner's started frame (or, without one, the
	// dispatch) to the result; 0 for a cell that never ran.
	Duration time.Duration
	// CellsCompleted counts the kernel's completed cells, this one
	// included when it completed.
	CellsCompleted int
	Output         proc.Output
	// Exception is set when Reason is exception.
	Exception *Exception
	// KilledBy names what ended the kernel under this cell ("" if
	// nothing did), or, for an exception cell that keeps its kernel, the
	// limit that raised the exception (cellKilledBy).
	KilledBy string
	// Exit is the interpreter's exit status when it died on its own under
	// this cell (Reason port_exit), so the host can report its code.
	Exit *proc.ExitStatus
	// DroppedLateOutput counts bytes that threads of earlier cells wrote
	// during this one, which the runner dropped (docs/protocol.md, Late
	// output and thread generations).
	DroppedLateOutput int
}

// Exception is what the cell raised; the runner already removed its own
// frames from Traceback. Every text field is sanitized and scrubbed like
// the cell's output.
type Exception struct {
	Kind, Name, Message, Traceback string
}

// StatusRequest asks for the worker's Status; answer with a request
// (RequestFuture), the worker responds with *Status.
type StatusRequest struct{}

// Phase is a worker's phase as its Status reports it (docs/architecture.md,
// Phases). The constants below are the one spelling of each; the
// registry's snapshot keys and the metrics' phase labels derive from them.
type Phase string

// Phases of a worker, as Status.Phase.
const (
	PhaseStarting   Phase = "starting"
	PhaseIdle       Phase = "idle"
	PhaseRunning    Phase = "running"
	PhaseCancelling Phase = "cancelling"
	PhaseStopping   Phase = "stopping"
)

// Phases lists every phase a Status can report, in lifecycle order.
var Phases = []Phase{PhaseStarting, PhaseIdle, PhaseRunning, PhaseCancelling, PhaseStopping}

// Status describes a worker without any code, output or credential.
type Status struct {
	Phase           Phase
	Generation      uint64
	Key             any
	QueueDepth      int
	ActiveRequestID string
	CellsCompleted  int
	ProcessAlive    bool
}

// Stop ends the worker gracefully: an active cell is
// interrupted and answered with Reason interrupted and KilledBy = Reason,
// queued cells get shutting_down, the kernel is asked to shut down, then
// its process group is terminated, and the actor stops. Watch the worker
// for *actor.Terminated to learn when it is gone.
type Stop struct{ Reason string }

// Messages the worker sends itself. Goroutines outside the actor only
// ever send these; they never touch the worker's state.
type (
	// frameChunk is bytes read from the kernel's control pipe. Its credit
	// is returned once the actor has handled it, which bounds how much
	// unread output can pile up in the mailbox.
	frameChunk struct {
		data    []byte
		credits chan struct{}
	}
	// processExited: the interpreter was reaped (its group killed first)
	// and its pipes drained.
	processExited struct{ status proc.ExitStatus }
	// callerGone: the Ctx of the Execute with this ticket is done.
	callerGone struct{ ticket uint64 }
	// queueExpired: the Deadline of the queued Execute with this ticket
	// passed.
	queueExpired struct{ ticket uint64 }
	// timerFired: the timer of kind armed with token expired. A token
	// that is no longer current is a stale timer and ignored.
	timerFired struct {
		kind  timerKind
		token uint64
	}
)
