package executecode

import (
	"context"
	"fmt"
	"time"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
)

// run is one call on its way through the pipeline: the call, the session
// scope it runs in (nil: none), and the limits it runs within.
type run struct {
	call   Call
	scope  *Owner
	python string
	// timeout is the call's effective timeout; deadline ends it, counted
	// from started (queue wait included).
	timeout  time.Duration
	started  time.Time
	deadline time.Time
	limits   proc.Limits
}

// newRun starts the clock of call.
func (r *Runtime) newRun(call Call, python string) run {
	started := time.Now()
	timeout := r.effectiveTimeout(call.TimeoutMS)
	return run{call: call, scope: call.Owner, python: python, timeout: timeout,
		started: started, deadline: started.Add(timeout), limits: r.limits()}
}

// runner runs a run in one mode. An error means no code ran: either a
// failure the caller gets as the tool's error, or (session mode only) a
// *notStarted, which fallbackFor turns into an isolated run.
type runner interface {
	run(ctx context.Context, rn run) (outcome, error)
}

// execute takes a call through the pipeline: the configured mode's runner,
// the fallback if the session could not start the cell, then one format
// for whichever ran.
func (r *Runtime) execute(ctx context.Context, call Call, python string) (Result, error) {
	rn := r.newRun(call, python)
	var mode runner = perCallRunner{r}
	if r.cfg.KernelMode == config.Session {
		mode = sessionRunner{r}
	}
	o, err := mode.run(ctx, rn)
	if reason, ok := fallbackFor(err); ok {
		o, err = r.runFallback(ctx, rn, reason, err)
	}
	if err != nil {
		return errorResult(err)
	}
	if sp := spillOf(o.output); sp.path != "" {
		r.bindSpill(sp.path, spillOwnerOf(rn))
	}
	res := r.format(o)
	// Only the caller's ctx makes an error of a run; the runtime's own
	// Close also ends runs as cancelled, and they are plain results.
	if cerr := ctx.Err(); cerr != nil && (o.killedBy == KilledByCancelled || res.Details.Reason == ReasonCancelled) {
		return res, fmt.Errorf("execute_code: run stopped: %w", cerr)
	}
	return res, nil
}

func (r *Runtime) limits() proc.Limits {
	return proc.Limits{
		CPUSeconds: r.cfg.CPULimitSeconds,
		MemoryMB:   r.cfg.MemoryLimitMB,
		FsizeMB:    r.cfg.FsizeLimitMB,
		NProc:      r.cfg.NprocLimit,
	}
}
