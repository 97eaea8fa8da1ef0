package executecode

import (
	"context"
	"time"

	"github.com/executecode/executecode/telemetry"
)

// Fallback reasons: session mode may run a call isolated, per call, only
// before any submitted code starts (docs/architecture.md, Rules: fallback
// only before code).
const (
	FallbackMissingScope        = "missing_session_scope"
	FallbackRegistryUnavailable = "registry_unavailable"
	FallbackCapacityExhausted   = "capacity_exhausted"
	FallbackStartupFailed       = "startup_failed"
	FallbackStopFailed          = "stop_failed"
)

// runFallback runs call per call with what is left of its deadline (at
// least one second) and marks the result as not persistent.
func (r *Runtime) runFallback(ctx context.Context, call Call, python, reason string, started time.Time, resetPerformed bool) (Result, error) {
	// Emitted before the run, whose own execute_code.stop follows.
	r.bus.Emit(telemetry.Fallback{Reason: telemetry.FallbackReason(reason)})
	left := r.effectiveTimeout(call.TimeoutMS) - time.Since(started)
	call.TimeoutMS = int(max(left, minTimeout).Milliseconds())
	call.Queued() // an isolated run takes no place in a kernel's FIFO
	res, err := r.runPerCall(ctx, call, python)
	if err != nil || res.Details == nil {
		return res, err
	}
	no := false
	ms := max(time.Since(started).Milliseconds(), 0)
	d := res.Details
	d.Persistent, d.KernelReused, d.StateRetained = false, &no, &no
	d.ResetPerformed, d.FallbackReason, d.DurationMS = resetPerformed, reason, &ms
	line := "Ran isolated in a fresh process (" + reason + "); nothing from this run persists."
	res.Content[0].Text = line + "\n\n" + res.Content[0].Text
	return res, nil
}
