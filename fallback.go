package executecode

import (
	"context"
	"errors"
	"time"

	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/telemetry"
)

// FallbackReason is Details.FallbackReason: why a session call ran
// isolated, per call. Session mode may do so only before any submitted
// code starts (docs/architecture.md, Rules: fallback only before code).
type FallbackReason string

// Values of FallbackReason, the same as telemetry's.
const (
	FallbackMissingScope        = FallbackReason(telemetry.FallbackMissingSessionScope)
	FallbackRegistryUnavailable = FallbackReason(telemetry.FallbackRegistryUnavailable)
	FallbackCapacityExhausted   = FallbackReason(telemetry.FallbackCapacityExhausted)
	FallbackStartupFailed       = FallbackReason(telemetry.FallbackStartupFailed)
	FallbackStopFailed          = FallbackReason(telemetry.FallbackStopFailed)
)

// step is where a session call stood when it failed before its cell
// could start.
type step int

const (
	stepScope   step = iota // the call has no attached owner
	stepReset               // the requested reset
	stepBridge              // staging the cell's bridge
	stepAcquire             // acquiring the kernel
	stepStart               // the kernel, queued on, never became ready
)

// notStarted is a session call that failed before any of its code could
// start; fallbackFor decides what it becomes.
type notStarted struct {
	step           step
	err            error
	resetPerformed bool
}

func (e *notStarted) Error() string {
	if e.err == nil {
		return "session call not started"
	}
	return "session call not started: " + e.err.Error()
}

func (e *notStarted) Unwrap() error { return e.err }

// errNoScope: a session call without an attached owner.
var errNoScope = errors.New("no session scope")

// fallbackFor is the one place that decides whether a call runs isolated
// instead of on its session's kernel, and why; err is what the session
// runner failed with.
func fallbackFor(err error) (FallbackReason, bool) {
	var ns *notStarted
	if !errors.As(err, &ns) {
		return "", false
	}
	switch {
	case ns.step == stepScope:
		return FallbackMissingScope, true
	case errors.Is(ns.err, registry.ErrUnavailable):
		return FallbackRegistryUnavailable, true
	case ns.step == stepReset:
		// The old kernel could not be confirmed gone: running on a new one
		// could race it, running isolated cannot.
		return FallbackStopFailed, true
	case errors.Is(ns.err, registry.ErrCapacityExhausted):
		return FallbackCapacityExhausted, true
	case ns.step == stepBridge, ns.step == stepStart, errors.Is(ns.err, registry.ErrStartupFailed):
		return FallbackStartupFailed, true
	}
	return FallbackRegistryUnavailable, true
}

// runFallback runs rn per call with what is left of its deadline (at
// least one second) and marks the outcome as not persistent.
func (r *Runtime) runFallback(ctx context.Context, rn run, reason FallbackReason, cause error) (outcome, error) {
	// Emitted before the run, whose own execute_code.stop follows.
	r.bus.Emit(telemetry.Fallback{Reason: telemetry.FallbackReason(reason)})
	call := rn.call
	call.TimeoutMS = int(max(rn.timeout-time.Since(rn.started), minTimeout).Milliseconds())
	o, err := perCallRunner{r}.run(ctx, r.newRun(call, rn.python))
	if err != nil {
		return o, err
	}
	var ns *notStarted
	errors.As(cause, &ns)
	o.started = rn.started
	o.fallback = &fallbackFacts{reason: reason, resetPerformed: ns.resetPerformed}
	return o, nil
}
