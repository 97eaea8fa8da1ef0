package executecode

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/executecode/executecode/internal/cluster/placement"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker"
)

// Reason is Details.Reason: how a session call ended ("" is success).
// The README lists each with the sentence its result starts or ends with.
type Reason string

// Values of Reason.
const (
	// ReasonException: the cell raised an uncaught exception; exit_code 1
	// (130 for a KeyboardInterrupt it raised), as a fresh python3 would
	// exit.
	ReasonException Reason = kernelworker.ReasonException
	// ReasonSystemExit: the cell raised SystemExit; exit_code is its code,
	// as python3 would exit with it.
	ReasonSystemExit Reason = "system_exit"
	// ReasonTimeout: the cell reached its deadline, running or queued.
	ReasonTimeout Reason = kernelworker.ReasonTimeout
	// ReasonCancelled: the caller's context ended (or the runtime closed).
	ReasonCancelled Reason = "cancelled"
	// ReasonOwnerGone: the session was detached before the cell finished.
	ReasonOwnerGone Reason = "owner_gone"
	// ReasonQueueFull: the kernel was busy and its queue full; nothing ran.
	ReasonQueueFull Reason = kernelworker.ReasonQueueFull
	// ReasonShuttingDown: the kernel was stopping when the cell reached
	// it; nothing ran.
	ReasonShuttingDown Reason = kernelworker.ReasonShuttingDown
	// ReasonKernelDiscarded: an earlier cell's kernel was discarded while
	// this one was queued; nothing ran.
	ReasonKernelDiscarded Reason = kernelworker.ReasonKernelDiscarded
	// ReasonPortExit: the interpreter died under the cell (os._exit, a
	// signal, a limit); exit_code is its exit status.
	ReasonPortExit Reason = kernelworker.ReasonPortExit
	// ReasonProtocolFault: the kernel broke the protocol and was discarded.
	ReasonProtocolFault Reason = kernelworker.ReasonProtocolFault
	// ReasonInterrupted: the kernel was stopped from outside (killed_by
	// says why) under the cell, or took the cell out of its queue.
	ReasonInterrupted Reason = kernelworker.ReasonInterrupted
	// ReasonInvalidRequest: the kernel refused the cell as malformed.
	ReasonInvalidRequest Reason = kernelworker.ReasonInvalidRequest
	// ReasonInvalidSessionKey: the session's kernel key could not be
	// built; nothing ran.
	ReasonInvalidSessionKey Reason = "invalid_session_key"
	// ReasonResetFailed: the requested reset failed; nothing ran.
	ReasonResetFailed Reason = "reset_failed"
	// ReasonRPCStartFailed: the cell's helper bridge could not start;
	// nothing ran.
	ReasonRPCStartFailed Reason = "rpc_start_failed"
)

// KilledBy is Details.KilledBy: what ended a run or its kernel ("" if
// nothing did), or the limit a cell's exception ran into.
type KilledBy string

// Values of KilledBy.
const (
	KilledByTimeout       KilledBy = proc.KilledByTimeout
	KilledByCancelled     KilledBy = proc.KilledByCancelled
	KilledByCPULimit      KilledBy = proc.KilledByCPULimit
	KilledByMemoryLimit   KilledBy = proc.KilledByMemoryLimit
	KilledByFsizeLimit    KilledBy = proc.KilledByFsizeLimit
	KilledBySignal        KilledBy = proc.KilledBySignal
	KilledByOwnerGone     KilledBy = kernelworker.KilledByOwnerGone
	KilledByReset         KilledBy = kernelworker.KilledByReset
	KilledByShutdown      KilledBy = kernelworker.KilledByShutdown
	KilledByProtocolFault KilledBy = kernelworker.KilledByProtocolFault
	KilledByEvicted       KilledBy = kernelworker.KilledByEvicted
	KilledByIdleReaped    KilledBy = kernelworker.KilledByIdleReaped
	// KilledByNodeLost: the kernel ran on a cluster's kernel node that was
	// lost (docs/cluster.md, Node loss); the cell is never replayed.
	KilledByNodeLost KilledBy = placement.KilledByNodeLost
)

// StateDiscardedLine ends the headline of every session result whose
// state_retained is false.
const StateDiscardedLine = "The session's state was discarded; the next cell starts fresh."

// notRunKeptLine ends the headline of a cell that left the queue unrun
// while the kernel kept its state.
const notRunKeptLine = "Nothing ran; the session's state is kept."

// withState appends what happened to the session's state to headline.
func withState(headline string, retained, ran bool) string {
	switch {
	case !retained:
		return sentence(headline) + " " + StateDiscardedLine
	case !ran:
		return sentence(headline) + " " + notRunKeptLine
	}
	return headline
}

func sentence(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// exceptionHeadline names the exception once, with the exit code a fresh
// python3 would have ended with.
func exceptionHeadline(e *kernelworker.Exception, code int) string {
	switch {
	case e == nil || e.Name == "":
		return fmt.Sprintf("Script raised an exception (exit code %d)", code)
	case e.Message == "":
		return fmt.Sprintf("Script raised %s (exit code %d)", e.Name, code)
	}
	return fmt.Sprintf("Script raised %s: %s (exit code %d)", e.Name, e.Message, code)
}

func exitedLine(code int) string { return fmt.Sprintf("Script exited with code %d", code) }

func intPtr(n int) *int { return &n }

// systemExitCode is the status python3 exits with for the SystemExit the
// runner reported as message ("SystemExit", "SystemExit: <code>"), and
// what python3 would print to stderr for a code that is not an int.
func systemExitCode(message string) (code int, printed string) {
	arg, ok := strings.CutPrefix(message, "SystemExit: ")
	if !ok {
		return 0, "" // sys.exit() or SystemExit(None)
	}
	switch arg {
	case "True":
		return 1, ""
	case "False":
		return 0, ""
	}
	if n, err := strconv.Atoi(arg); err == nil {
		return n & 0xFF, ""
	}
	return 1, arg + "\n"
}

// ending is how a run ended, in either mode. Each ending has one
// headline wording (headline) and, for a session cell, one Details.Reason
// (reasons); what varies within an ending (an exit code, a limit, the
// exception, whether any code ran) travels in the outcome.
type ending int

const (
	// endOK: the script ran to its end and exited 0.
	endOK ending = iota
	// endExit: the script exited with a code of its own: a non-zero status
	// per call, a SystemExit (any code) in a cell. The headline follows the
	// output.
	endExit
	// endKilled: a limit or a signal ended a per-call interpreter (an
	// uncaught MemoryError or EFBIG under its limit included).
	endKilled
	// endException: a cell raised an uncaught exception; its headline
	// leads, and the traceback is part of the diagnostics.
	endException
	endTimeout
	endCancelled
	endOwnerGone
	// endCrashed: a cell's interpreter died under it (port_exit).
	endCrashed
	endQueueFull
	endShuttingDown
	endKernelDiscarded
	endProtocolFault
	endInterrupted
	endInvalidRequest
	// endNotRun: the session failed around the cell before any code ran
	// (outcome.note words why, outcome.reason says which failure).
	endNotRun
	// endUnknown: the worker answered a reason this facade does not word
	// (outcome.reason carries it).
	endUnknown
)

// reasons is the Details.Reason of each session ending that has a fixed
// one; endNotRun and endUnknown carry theirs.
var reasons = map[ending]Reason{
	endExit:            ReasonSystemExit,
	endException:       ReasonException,
	endTimeout:         ReasonTimeout,
	endCancelled:       ReasonCancelled,
	endOwnerGone:       ReasonOwnerGone,
	endCrashed:         ReasonPortExit,
	endQueueFull:       ReasonQueueFull,
	endShuttingDown:    ReasonShuttingDown,
	endKernelDiscarded: ReasonKernelDiscarded,
	endProtocolFault:   ReasonProtocolFault,
	endInterrupted:     ReasonInterrupted,
	endInvalidRequest:  ReasonInvalidRequest,
}

// cellEndings maps each worker reason whose ending needs nothing more of
// the answer; cellEnding reads the rest ("", exception, port_exit) itself.
var cellEndings = map[string]ending{
	kernelworker.ReasonTimeout:         endTimeout,
	kernelworker.ReasonQueueFull:       endQueueFull,
	kernelworker.ReasonShuttingDown:    endShuttingDown,
	kernelworker.ReasonKernelDiscarded: endKernelDiscarded,
	kernelworker.ReasonProtocolFault:   endProtocolFault,
	kernelworker.ReasonInterrupted:     endInterrupted,
	kernelworker.ReasonInvalidRequest:  endInvalidRequest,
}

const ownerGoneLine = "Script cancelled: its session was detached."

func timedOutLine(d time.Duration) string {
	return fmt.Sprintf("Script timed out after %dms.", d.Milliseconds())
}

// headline words o's ending. leads says that it precedes the output, as
// for a run that was stopped; an exit's headline follows it.
func (r *Runtime) headline(o outcome) (h string, leads bool) {
	switch o.end {
	case endOK:
		return "", false
	case endExit:
		if *o.exitCode != 0 {
			return exitedLine(*o.exitCode), false
		}
		return "", false
	case endKilled:
		return proc.LimitHeadline(string(o.killedBy), r.limits(), *o.exit), false
	case endException:
		// A MemoryError or EFBIG under a configured limit says which
		// limit, as per call.
		if h := proc.LimitHeadline(string(o.killedBy), r.limits(), proc.ExitStatus{}); h != "" {
			return h, true
		}
		return exceptionHeadline(o.exception, *o.exitCode), true
	case endTimeout:
		if !o.ran {
			return fmt.Sprintf("Script timed out after %dms before it started.", o.timeout.Milliseconds()), true
		}
		return timedOutLine(o.timeout), true
	case endCancelled:
		if !o.ran {
			return "Script cancelled before it started.", true
		}
		return cancelledLine, true
	case endOwnerGone:
		if !o.ran {
			return "Script did not run: its session was detached.", true
		}
		return ownerGoneLine, true
	case endCrashed:
		switch {
		case !o.ran:
			return "Script did not run: the session's kernel exited under the cell before it.", true
		case o.exit == nil:
			return "Script's kernel exited unexpectedly", false
		}
		if h := proc.LimitHeadline(string(o.killedBy), r.limits(), *o.exit); h != "" {
			return h, false
		}
		return exitedLine(o.exit.Code), false
	case endQueueFull:
		return fmt.Sprintf("Script did not run: the session's kernel is busy and its queue is full (max_queued_cells_per_kernel = %d).", r.cfg.MaxQueuedCellsPerKernel), true
	case endShuttingDown:
		return "Script did not run: the session's kernel was shutting down.", true
	case endKernelDiscarded:
		return "Script did not run: the cell before it was stopped and the session's kernel discarded.", true
	case endProtocolFault:
		if !o.ran {
			return "Script did not run: the session's kernel broke the protocol under the cell before it.", true
		}
		return "Script stopped: the session's kernel broke the protocol.", true
	case endInterrupted:
		if !o.ran {
			return "Script did not run: it was taken out of the session's queue.", true
		}
		return fmt.Sprintf("Script interrupted: the session's kernel was stopped (%s).", o.killedBy), true
	case endInvalidRequest:
		return "Script did not run: the session's kernel refused the request as malformed.", true
	case endNotRun:
		return o.note, true
	}
	return "Script ended: " + string(o.reason) + ".", true
}

// saysState says whether a cell's headline ends with what became of
// the session's state: every ending but a completed cell's (success, exit,
// exception), whose state the kernel kept.
func (e ending) saysState() bool {
	switch e {
	case endOK, endExit, endException:
		return false
	}
	return true
}
