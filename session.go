package executecode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/executecode/executecode/actors"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/privatetmp"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/shimpy"
	"github.com/executecode/executecode/tools"
)

const (
	// registryTimeout bounds one request to the registry; acquire may boot
	// a kernel (10 s startup deadline) and reset may wait out a stuck
	// kernel's 15 s stop before they answer.
	registryTimeout = 20 * time.Second
	// defaultReapInterval is how often the registry looks for idle
	// kernels.
	defaultReapInterval = time.Minute
	// replyGrace is how long past its deadline a call waits for the
	// worker's own timeout answer, which carries the partial output and
	// comes once the kernel and every process of its session are gone;
	// it is also how long a cancelled call waits for that end.
	replyGrace = kernelworker.EndingBound + time.Second
	// serverTimeout bounds the per-cell RPC server's abort, drain and stop.
	serverTimeout = 5 * time.Second
)

// Scope identifies the session a kernel belongs to: the persisted session
// id (stable across turns and resumes) and the agent or profile id.
type Scope struct {
	SessionID string
	AgentID   string
}

// Owner is an attached session. Its kernels keep their state between
// calls until Detach; a detached owner is exactly like a dead one to the
// registry (docs/architecture.md, Owner departure).
type Owner struct {
	scope    Scope
	owner    actors.Owner
	tree     *actors.Tree
	detached atomic.Bool
}

// Scope is the owner's session scope.
func (o *Owner) Scope() Scope { return o.scope }

// ErrBadScope reports a session scope with a blank session or agent id.
var ErrBadScope = errors.New("session scope needs a non-blank session id and agent id")

// Attach makes an owner for scope, starting the kernel subsystem on first
// use.
func (r *Runtime) Attach(scope Scope) (*Owner, error) {
	if strings.TrimSpace(scope.SessionID) == "" || strings.TrimSpace(scope.AgentID) == "" {
		return nil, ErrBadScope
	}
	tree, err := r.kernels()
	if err != nil {
		return nil, err
	}
	return &Owner{scope: scope, owner: tree.NewOwner(), tree: tree}, nil
}

// Detach ends the owner: its queued cells leave their queues, a kernel
// running its cell is discarded, and kernels no other owner holds stop.
// Detach is idempotent.
func (o *Owner) Detach(ctx context.Context) error {
	if o == nil || o.detached.Swap(true) {
		return nil
	}
	_, err := request[*registry.DetachReply](ctx, o.tree, &registry.Detach{Owner: o.owner.PID})
	o.owner.Stop()
	return err
}

// kernels starts the supervision tree on first use.
func (r *Runtime) kernels() (*actors.Tree, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if r.tree != nil {
		return r.tree, nil
	}
	cfg := registry.Config{
		MaxLiveKernels: r.cfg.MaxLiveKernels,
		IdleTimeout:    r.cfg.KernelIdleTimeout(),
		ReapInterval:   r.reapInterval,
		Telemetry:      r.bus,
		Logger:         &r.log,
	}
	base := kernelworker.Options{
		Spawner:      r.spawner,
		Workspace:    r.kernelWorkspace,
		Spill:        r.newSpill,
		ReleaseSpill: r.releaseSpill,
		// Like the spill opener, the cap is the runtime's, not the key's.
		MaxSpillBytes: r.cfg.SpillLimitBytes(),
		Telemetry:     r.bus,
		Logger:        &r.log,
	}
	tree, err := actors.Start(cfg, base, approval.Config{Approver: r.approver, Telemetry: r.bus, Logger: &r.log},
		actors.WithIntrospection(introspect.Config{QueueCapacity: r.cfg.MaxQueuedCellsPerKernel, Journal: r.journal}))
	if err != nil {
		return nil, err
	}
	r.tree = tree
	return tree, nil
}

func (r *Runtime) kernelWorkspace() (string, error) {
	rs, err := r.staging()
	if err != nil {
		return "", err
	}
	return privatetmp.ReserveDir(rs.work.Path(), "lemon-pyrepl")
}

// request asks an actor of the tree and waits for its typed answer.
func request[T any](ctx context.Context, tree *actors.Tree, msg any) (T, error) {
	var zero T
	timeout := registryTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d), time.Millisecond))
	}
	res, err := tree.System.Root.RequestFuture(tree.Registry, msg, timeout).Result()
	if err != nil {
		return zero, fmt.Errorf("%w: %w", errRegistryUnavailable, err)
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%w: unexpected answer %T", errRegistryUnavailable, res)
	}
	return v, nil
}

var errRegistryUnavailable = errors.New("registry unavailable")

// cellOutcome is how a session call ended before formatting.
type cellOutcome struct {
	res            kernelworker.CellResult
	replied        bool
	timedOut       bool
	cancelled      bool
	ownerGone      bool
	stats          pump.Stats
	statsLost      bool
	blocks         []string
	reused         bool
	resetPerformed bool
	timeout        time.Duration
	started        time.Time
}

// runSession runs call as a cell on the owner's kernel
// (docs/architecture.md, The life of a session cell). It falls back to a
// fresh process only before any
// submitted code can have started.
func (r *Runtime) runSession(ctx context.Context, call Call, python string) (Result, error) {
	started := time.Now()
	timeout := r.effectiveTimeout(call.TimeoutMS)
	deadline := started.Add(timeout)
	o := call.Owner
	if o == nil || o.detached.Load() {
		return r.runFallback(ctx, call, python, FallbackMissingScope, started, false)
	}
	key, err := registry.NewKey(o.scope.SessionID, o.scope.AgentID, r.rootDir, python, r.cfg.Tools)
	if err != nil {
		return r.sessionFailure(ReasonInvalidSessionKey, "Script did not run: the session's kernel key is invalid ("+r.scrubError(err)+").", true, started, false), nil
	}
	tree := o.tree
	reqCtx, cancelReq := context.WithDeadline(ctx, deadline)
	defer cancelReq()

	resetPerformed := false
	if call.Reset {
		rr, err := request[*registry.ResetReply](reqCtx, tree, &registry.Reset{Key: key, Owner: o.owner.PID})
		switch {
		case err != nil:
			return r.runFallback(ctx, call, python, FallbackRegistryUnavailable, started, false)
		case errors.Is(rr.Err, registry.ErrStopFailed):
			// The old kernel could not be confirmed gone: running on a
			// new one could race it, running isolated cannot.
			return r.runFallback(ctx, call, python, FallbackStopFailed, started, false)
		case rr.Err != nil:
			return r.sessionFailure(ReasonResetFailed, "Script did not run: the session's kernel could not be reset ("+r.scrubError(rr.Err)+").", false, started, false), nil
		}
		resetPerformed = rr.Performed
	}

	ws, err := r.stageCellBridge()
	if err != nil {
		return r.runFallback(ctx, call, python, FallbackStartupFailed, started, resetPerformed)
	}
	defer privatetmp.Teardown(ws.base, privatetmp.LabelCellBridge, &r.log)

	// The cell's caller context: queued wait and execution end with it.
	// The worker times the cell out at the deadline itself, queued or
	// running; the grace past it covers the kernel's end, which the
	// worker's answer waits for, and only a wedged worker meets it.
	cellCtx, cancelCell := context.WithDeadline(ctx, deadline.Add(replyGrace))
	defer cancelCell()
	defer context.AfterFunc(r.base, cancelCell)()

	acq, err := request[*registry.AcquireReply](reqCtx, tree, &registry.Acquire{
		Key: key, Owner: o.owner.PID, Caller: cellCtx,
		MaxLiveKernels: r.cfg.MaxLiveKernels, IdleTimeout: r.cfg.KernelIdleTimeout(),
		Worker: registry.WorkerOptions{
			InterpreterConfigured: python,
			HelperSource:          r.helperSource,
			MaxQueuedCells:        r.cfg.MaxQueuedCellsPerKernel,
			MaxOutputBytes:        r.cfg.MaxOutputBytes,
			Limits:                r.kernelLimits(),
		},
	})
	if err == nil {
		err = acq.Err
	}
	switch {
	case errors.Is(err, registry.ErrCapacityExhausted):
		return r.runFallback(ctx, call, python, FallbackCapacityExhausted, started, resetPerformed)
	case errors.Is(err, registry.ErrStartupFailed):
		return r.runFallback(ctx, call, python, FallbackStartupFailed, started, resetPerformed)
	case err != nil:
		return r.runFallback(ctx, call, python, FallbackRegistryUnavailable, started, resetPerformed)
	}
	alloc := acq.Allocation
	defer func() {
		relCtx, cancel := context.WithTimeout(context.Background(), registryTimeout)
		defer cancel()
		_, _ = request[*registry.ReleaseReply](relCtx, tree, &registry.Release{Lease: alloc.Lease})
	}()

	// The cell's one scrubber: its bridge and token, the kernel's
	// workspace (where the runner and the helpers' __file__ live) and the
	// staging root. The worker applies it to the output as it streams and
	// to the exception; the rest is rewritten here.
	sc := newScrubber(r.scrubRoot(), ws.token, scrubTarget{ws.rpc, bridgeName},
		scrubTarget{ws.base, workspaceName}, scrubTarget{alloc.Workspace, workspaceName})
	policy, approvals, err := r.gate()
	if err != nil {
		return r.sessionFailure(ReasonRPCStartFailed, "Script did not run: its helper bridge could not start ("+sc.String(err.Error())+").", true, started, resetPerformed), nil
	}
	srv, err := pump.StartServer(pump.Config{
		Dir: ws.rpc, Token: ws.token, Tools: r.innerTools(),
		MaxCalls: r.cfg.MaxRPCCalls, MaxResultBytes: r.cfg.MaxRPCResultBytes, MaxParallel: r.cfg.MaxParallelRPC,
		OnNotify: call.Notify, ScrubNotify: sc.String, Bells: alloc.Bells, Logger: &r.log,
		OnAuthFailure: r.bridgeDenied, OnFrameRefused: r.bridgeDenied, OnRoundTrip: r.metrics.ObserveRoundTrip,
		Policy: policy, Approvals: approvals,
		ApprovalContext: pump.ApprovalContext{SessionID: o.scope.SessionID, AgentID: o.scope.AgentID, Timeout: r.cfg.ApprovalTimeout(), Caller: call.ApprovalTag},
	})
	if err != nil {
		return r.sessionFailure(ReasonRPCStartFailed, "Script did not run: its helper bridge could not start ("+sc.String(err.Error())+").", true, started, resetPerformed), nil
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), serverTimeout)
		defer cancel()
		srv.Stop(stopCtx)
	}()

	// The cell lives as long as both the call and the lease: the registry
	// ends the lease when its owner leaves, which takes a queued cell out
	// of the queue and discards the kernel under an active one.
	execCtx, cancelExec := context.WithCancel(cellCtx)
	defer cancelExec()
	defer context.AfterFunc(alloc.Lease.Context(), cancelExec)()
	reply := make(chan kernelworker.CellResult, 1)
	tree.System.Root.Send(alloc.Worker, &kernelworker.Execute{
		Ctx:       execCtx,
		Code:      shimpy.RenderScript(call.Script, r.cfg.Tools),
		Bridge:    &kernelworker.Bridge{Dir: ws.rpc, Token: ws.token, MaxTextBytes: r.cfg.MaxTextBytes},
		Scrub:     sc,
		Timeout:   max(time.Until(deadline), time.Millisecond),
		Deadline:  deadline,
		CPUBudget: time.Duration(r.cfg.CPULimitSeconds) * time.Second,
		Reply:     reply,
	})
	call.Queued()

	out := cellOutcome{reused: alloc.Reused, resetPerformed: resetPerformed, timeout: timeout, started: started}
	select {
	case out.res = <-reply:
		out.replied = true
	case <-execCtx.Done():
		switch {
		case ctx.Err() != nil || r.base.Err() != nil:
			out.cancelled = true
		case cellCtx.Err() != nil:
			out.timedOut = true
		default:
			out.ownerGone = true
		}
		if !out.timedOut {
			// The worker answers once the kernel it discards is gone: no
			// process of the cell outlives the call. (A timed-out wait
			// already gave a wedged worker its grace.)
			t := time.NewTimer(replyGrace)
			select {
			case out.res = <-reply:
				out.replied = true
			case <-t.C:
			}
			t.Stop()
		}
	}
	if !out.cancelled && !out.timedOut && o.detached.Load() && endedByOwner(out.res) {
		// The owner detached under the cell: the worker's answer (the
		// kernel stopped, the queue dropped) is the detach's doing.
		out.ownerGone = true
	}
	// No helper call outlives its cell.
	abortCtx, cancelAbort := context.WithTimeout(context.Background(), serverTimeout)
	defer cancelAbort()
	srv.Abort(abortCtx)
	out.stats, err = srv.DrainAndStats(abortCtx)
	out.statsLost = err != nil
	out.blocks = pump.ReadTextBlocks(ws.rpc, ws.token, r.cfg.MaxTextBytes, r.bridgeDenied)

	if out.replied && out.res.Reason == kernelworker.ReasonStartupFailed {
		// Queued on a kernel that never became ready: nothing started. (A
		// kernel that died after it was ready is a dead worker, which the
		// seed says is never retried or fallen back.)
		return r.runFallback(ctx, call, python, FallbackStartupFailed, started, resetPerformed)
	}
	return r.formatSession(out, sc), nil
}

// stageCellBridge reserves a cell's private bridge: a base directory, its
// rpc directory and a fresh token.
func (r *Runtime) stageCellBridge() (ws workspace, err error) {
	rs, err := r.staging()
	if err != nil {
		return ws, err
	}
	if ws.base, err = privatetmp.ReserveDir(rs.work.Path(), "lemon-exec-code-cell"); err != nil {
		return ws, err
	}
	if ws.rpc, err = privatetmp.ReserveDir(ws.base, "rpc"); err == nil {
		ws.token, err = pump.NewToken()
	}
	if err != nil {
		privatetmp.Teardown(ws.base, privatetmp.LabelCellBridge, &r.log)
	}
	return ws, err
}

// kernelLimits are the per-kernel rlimits: the CPU limit is a per-cell
// budget the worker manages with prlimit, so the hard limit stays open.
func (r *Runtime) kernelLimits() kernelworker.Limits {
	l := r.limits()
	l.CPUHardUnlimited = true
	return l
}

// sessionFailure is the result of a session call that failed around the
// cell, before any code ran; retained says whether the kernel's state is
// untouched.
func (r *Runtime) sessionFailure(reason, headline string, retained bool, started time.Time, resetPerformed bool) Result {
	no := false
	ms := max(time.Since(started).Milliseconds(), 0)
	d := &Details{Persistent: true, KernelReused: &no, StateRetained: &retained, DurationMS: &ms,
		ResetPerformed: resetPerformed, Reason: reason, RPCTools: []string{}}
	return textResult(withState(headline, retained, false), d, Trusted, nil)
}

// endedByOwner says whether res is how the worker answers a cell whose
// owner left: the kernel stopped under it, or its queue dropped it.
func endedByOwner(res kernelworker.CellResult) bool {
	switch res.Reason {
	case kernelworker.ReasonInterrupted, kernelworker.ReasonShuttingDown, kernelworker.ReasonKernelDiscarded:
		return true
	}
	return res.KilledBy == kernelworker.KilledByOwnerGone
}

// formatSession builds the model-visible result of a cell, laid out and
// worded as a per-call run's where the ending exists in both modes
// (headline, text() blocks, then the labelled diagnostics tail; an exit's
// headline after the output when there are no blocks), except that an
// exception keeps its leading "Script raised" headline; every ending that
// loses the state says so. state_retained only when the worker said so.
// The worker scrubbed and sanitized the output and the exception with sc;
// the blocks are scrubbed here.
func (r *Runtime) formatSession(o cellOutcome, sc *kernelworker.Scrubber) Result {
	res := o.res
	retained := o.replied && res.StateRetained
	ran := !o.replied || res.RequestID != ""
	reused := o.reused
	ms := max(time.Since(o.started).Milliseconds(), 0)
	d := &Details{
		Persistent: true, KernelReused: &reused, StateRetained: &retained, DurationMS: &ms,
		ResetPerformed: o.resetPerformed,
		RPCCalls:       o.stats.Calls, RPCDenied: o.stats.Denied, RPCErrors: o.stats.Errors, RPCBytes: o.stats.Bytes,
		RPCTools:          append([]string{}, o.stats.SortedTools()...),
		RPCAccountingLoss: o.stats.AccountingLoss || o.statsLost,
	}
	out := ""
	var sp spillNote
	if o.replied {
		d.Truncated = res.Output.Truncated
		sp = spillOf(res.Output)
		d.FullOutputPath = sp.path
		out = res.Output.Text
		d.Reason, d.KilledBy = publicReason(res), res.KilledBy
	}
	blocks := scrubAll(sc, o.blocks)

	var e ending
	switch {
	case o.cancelled:
		d.Reason, d.KilledBy = ReasonCancelled, KilledByCancelled
		h := cancelledLine
		if !ran {
			h = "Script cancelled before it started."
		}
		e = ending{headline: withState(h, retained, ran), stopped: true}
	case o.timedOut:
		d.Reason, d.KilledBy = ReasonTimeout, KilledByTimeout
		e = ending{headline: withState(timedOutLine(o.timeout), retained, ran), stopped: true}
	case o.ownerGone:
		d.Reason, d.KilledBy = ReasonOwnerGone, KilledByOwnerGone
		h := ownerGoneLine
		if !ran {
			h = "Script did not run: its session was detached."
		}
		e = ending{headline: withState(h, retained, ran), stopped: true}
	default:
		e = r.cellEnding(res, o.timeout, retained, ran, &out)
	}
	d.ExitCode = e.exitCode

	var text string
	if len(blocks) > 0 {
		text = assemble(e.headline, blocks, out, sp)
	} else {
		text = historicText(e.headline, out, sp, e.stopped)
	}
	trust := Trusted
	if _, web := o.stats.ToolsUsed[tools.Webfetch]; web || o.stats.Untrusted || d.RPCAccountingLoss {
		trust = Untrusted
	}
	return textResult(text, d, trust, blocks)
}

const ownerGoneLine = "Script cancelled: its session was detached."

func timedOutLine(d time.Duration) string {
	return fmt.Sprintf("Script timed out after %dms.", d.Milliseconds())
}

// withTraceback appends the runner's filtered traceback to the captured
// output, so the diagnostics show where the exception came from, as a
// per-call run's do.
func withTraceback(out, tb string) string {
	if tb == "" {
		return out
	}
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	// python3 ends the traceback it prints with a newline.
	if !strings.HasSuffix(tb, "\n") {
		tb += "\n"
	}
	return out + tb
}
