package executecode

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/executecode/executecode/kernelworker"

	"github.com/executecode/executecode/internal/proc"
)

// Values of Details.Reason: how a session cell ended ("" is success).
// The README lists each with the sentence its result starts or ends with.
const (
	// ReasonException: the cell raised an uncaught exception; exit_code 1
	// (130 for a KeyboardInterrupt it raised), as a fresh python3 would
	// exit.
	ReasonException = kernelworker.ReasonException
	// ReasonSystemExit: the cell raised SystemExit; exit_code is its code,
	// as python3 would exit with it.
	ReasonSystemExit = "system_exit"
	// ReasonTimeout: the cell reached its deadline, running or queued.
	ReasonTimeout = kernelworker.ReasonTimeout
	// ReasonCancelled: the caller's context ended (or the runtime closed).
	ReasonCancelled = "cancelled"
	// ReasonOwnerGone: the session was detached before the cell finished.
	ReasonOwnerGone = "owner_gone"
	// ReasonQueueFull: the kernel was busy and its queue full; nothing ran.
	ReasonQueueFull = kernelworker.ReasonQueueFull
	// ReasonShuttingDown: the kernel was stopping when the cell reached
	// it; nothing ran.
	ReasonShuttingDown = kernelworker.ReasonShuttingDown
	// ReasonKernelDiscarded: an earlier cell's kernel was discarded while
	// this one was queued; nothing ran.
	ReasonKernelDiscarded = kernelworker.ReasonKernelDiscarded
	// ReasonPortExit: the interpreter died under the cell (os._exit, a
	// signal, a limit); exit_code is its exit status.
	ReasonPortExit = kernelworker.ReasonPortExit
	// ReasonProtocolFault: the kernel broke the protocol and was discarded.
	ReasonProtocolFault = kernelworker.ReasonProtocolFault
	// ReasonInterrupted: the kernel was stopped from outside (killed_by
	// says why) under the cell, or took the cell out of its queue.
	ReasonInterrupted = kernelworker.ReasonInterrupted
	// ReasonInvalidRequest: the kernel refused the cell as malformed.
	ReasonInvalidRequest = kernelworker.ReasonInvalidRequest
	// ReasonInvalidSessionKey: the session's kernel key could not be
	// built; nothing ran.
	ReasonInvalidSessionKey = "invalid_session_key"
	// ReasonResetFailed: the requested reset failed; nothing ran.
	ReasonResetFailed = "reset_failed"
	// ReasonRPCStartFailed: the cell's helper bridge could not start;
	// nothing ran.
	ReasonRPCStartFailed = "rpc_start_failed"
)

// Values of Details.KilledBy: what ended a run or its kernel.
const (
	KilledByTimeout       = proc.KilledByTimeout
	KilledByCancelled     = proc.KilledByCancelled
	KilledByCPULimit      = proc.KilledByCPULimit
	KilledByMemoryLimit   = proc.KilledByMemoryLimit
	KilledByFsizeLimit    = proc.KilledByFsizeLimit
	KilledBySignal        = proc.KilledBySignal
	KilledByOwnerGone     = kernelworker.KilledByOwnerGone
	KilledByReset         = kernelworker.KilledByReset
	KilledByShutdown      = kernelworker.KilledByShutdown
	KilledByProtocolFault = kernelworker.KilledByProtocolFault
	KilledByEvicted       = kernelworker.KilledByEvicted
	KilledByIdleReaped    = kernelworker.KilledByIdleReaped
)

// StateDiscardedLine ends the headline of every session result whose
// state_retained is false.
const StateDiscardedLine = "The session's state was discarded; the next cell starts fresh."

// notRunKeptLine ends the headline of a cell that left the queue unrun
// while the kernel kept its state.
const notRunKeptLine = "Nothing ran; the session's state is kept."

// ending is a session result's headline and where it goes: a stopped
// run's headline precedes its output, an exited one's follows it, as in
// a per-call run.
type ending struct {
	headline string
	stopped  bool
	exitCode *int
}

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

// cellEnding words how a replied cell ended. out is the cell's output,
// which a SystemExit or a traceback extends as python3 would.
func (r *Runtime) cellEnding(res kernelworker.CellResult, timeout time.Duration, retained, ran bool, out *string) ending {
	switch res.Reason {
	case "":
		return ending{exitCode: intPtr(0)}
	case kernelworker.ReasonException:
		if res.Exception != nil && res.Exception.Kind == "system_exit" {
			code, printed := systemExitCode(res.Exception.Message)
			*out += printed
			e := ending{exitCode: intPtr(code)}
			if code != 0 {
				e.headline = exitedLine(code)
			}
			return e
		}
		code := 1
		if res.Exception != nil && res.Exception.Kind == "interrupted" {
			code = 128 + int(syscall.SIGINT) // python3 re-raises it as SIGINT on itself
		}
		// A MemoryError or EFBIG under a configured limit says which limit,
		// as per call.
		h := proc.LimitHeadline(res.KilledBy, r.limits(), proc.ExitStatus{})
		if h == "" {
			h = exceptionHeadline(res.Exception, code)
		}
		if res.Exception != nil {
			*out = withTraceback(*out, res.Exception.Traceback)
		}
		// The headline leads: the traceback is part of the diagnostics.
		return ending{headline: h, exitCode: intPtr(code), stopped: true}
	case kernelworker.ReasonPortExit:
		if !ran {
			return ending{headline: withState("Script did not run: the session's kernel exited under the cell before it.", retained, ran), stopped: true}
		}
		e := ending{headline: "Script's kernel exited unexpectedly"}
		if res.Exit != nil {
			e.exitCode = intPtr(res.Exit.Code)
			e.headline = proc.LimitHeadline(res.KilledBy, r.limits(), *res.Exit)
			if e.headline == "" {
				e.headline = exitedLine(res.Exit.Code)
			}
		}
		e.headline = withState(e.headline, retained, ran)
		return e
	case kernelworker.ReasonTimeout:
		if !ran {
			return ending{headline: withState(fmt.Sprintf("Script timed out after %dms before it started.", timeout.Milliseconds()), retained, ran), stopped: true}
		}
		return ending{headline: withState(timedOutLine(timeout), retained, ran), stopped: true}
	case kernelworker.ReasonQueueFull:
		return ending{headline: withState(fmt.Sprintf("Script did not run: the session's kernel is busy and its queue is full (max_queued_cells_per_kernel = %d).", r.cfg.MaxQueuedCellsPerKernel), retained, ran), stopped: true}
	case kernelworker.ReasonShuttingDown:
		return ending{headline: withState("Script did not run: the session's kernel was shutting down.", retained, ran), stopped: true}
	case kernelworker.ReasonKernelDiscarded:
		return ending{headline: withState("Script did not run: the cell before it was stopped and the session's kernel discarded.", retained, ran), stopped: true}
	case kernelworker.ReasonProtocolFault:
		if !ran {
			return ending{headline: withState("Script did not run: the session's kernel broke the protocol under the cell before it.", retained, ran), stopped: true}
		}
		return ending{headline: withState("Script stopped: the session's kernel broke the protocol.", retained, ran), stopped: true}
	case kernelworker.ReasonInterrupted:
		if !ran {
			return ending{headline: withState("Script did not run: it was taken out of the session's queue.", retained, ran), stopped: true}
		}
		return ending{headline: withState(fmt.Sprintf("Script interrupted: the session's kernel was stopped (%s).", res.KilledBy), retained, ran), stopped: true}
	case kernelworker.ReasonInvalidRequest:
		return ending{headline: withState("Script did not run: the session's kernel refused the request as malformed.", retained, ran), stopped: true}
	}
	return ending{headline: withState("Script ended: "+res.Reason+".", retained, ran), stopped: true}
}

// publicReason is the Details.Reason of a replied cell.
func publicReason(res kernelworker.CellResult) string {
	if res.Reason == kernelworker.ReasonException && res.Exception != nil && res.Exception.Kind == "system_exit" {
		return ReasonSystemExit
	}
	return res.Reason
}
