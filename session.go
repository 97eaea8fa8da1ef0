package executecode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/executecode/executecode/actors"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/shimpy"
)

const (
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
// registry (docs/architecture.md, Owner departure), and a call through it
// afterwards is ErrDetached.
type Owner struct {
	rt       *Runtime
	scope    Scope
	owner    *registry.Owner
	tree     *actors.Tree
	detached atomic.Bool
	// coOwner: made by AttachCoOwner, so not the scope's handle that
	// Attach hands out.
	coOwner bool
}

// Scope is the owner's session scope.
func (o *Owner) Scope() Scope { return o.scope }

// ErrBadScope reports a session scope with a blank session or agent id.
var ErrBadScope = errors.New("session scope needs a non-blank session id and agent id")

// Attach returns the owner of scope, starting the kernel subsystem on
// first use. It is idempotent, as serve's attach is: until that owner is
// detached, every Attach of the same scope returns the same *Owner, so a
// host that attaches on each turn holds one owner, not one per turn. A
// second owner of the same kernels is made only on purpose, with
// AttachCoOwner.
func (r *Runtime) Attach(ctx context.Context, scope Scope) (*Owner, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	r.attachMu.Lock()
	defer r.attachMu.Unlock()
	if r.isClosed() {
		return nil, ErrClosed
	}
	if o := r.owners[scope]; o != nil && !o.detached.Load() {
		return o, nil
	}
	o, err := r.newOwner(ctx, scope)
	if err != nil {
		return nil, err
	}
	if r.owners == nil {
		r.owners = map[Scope]*Owner{}
	}
	r.owners[scope] = o
	return o, nil
}

// AttachCoOwner makes another owner of scope's kernels: each co-owner
// detaches on its own, and the kernels stop only when the last one is
// gone. Attach never returns a co-owner.
func (r *Runtime) AttachCoOwner(ctx context.Context, scope Scope) (*Owner, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	o, err := r.newOwner(ctx, scope)
	if err != nil {
		return nil, err
	}
	o.coOwner = true
	return o, nil
}

func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func checkScope(scope Scope) error {
	if strings.TrimSpace(scope.SessionID) == "" || strings.TrimSpace(scope.AgentID) == "" {
		return ErrBadScope
	}
	return nil
}

func (r *Runtime) newOwner(ctx context.Context, scope Scope) (*Owner, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	tree, err := r.kernels()
	if err != nil {
		return nil, err
	}
	owner, err := tree.Registry.Attach(ctx)
	if err != nil {
		return nil, err
	}
	return &Owner{rt: r, scope: scope, owner: owner, tree: tree}, nil
}

// Detach ends the owner: its queued cells leave their queues, a kernel
// running its cell is discarded, and kernels no other owner holds stop.
// A later Attach of the scope makes a new owner. Detach is idempotent,
// and nil after the runtime's Close.
func (o *Owner) Detach(ctx context.Context) error {
	if o == nil || o.detached.Swap(true) {
		return nil
	}
	if !o.coOwner {
		o.rt.attachMu.Lock()
		if o.rt.owners[o.scope] == o {
			delete(o.rt.owners, o.scope)
		}
		o.rt.attachMu.Unlock()
	}
	if o.rt.isClosed() {
		// Close stopped every kernel and the registry with them: there is
		// nothing left to leave, so a deferred Detach after Close is fine.
		return nil
	}
	return o.tree.Registry.Detach(ctx, o.owner)
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
		Spawner:          r.spawner,
		Workspace:        r.kernelWorkspace,
		ReleaseWorkspace: r.releaseKernelWorkspace,
		Spill:            r.newSpill,
		ReleaseSpill:     r.releaseSpill,
		// Like the spill opener, the cap is the runtime's, not the key's.
		MaxSpillBytes: r.cfg.SpillLimitBytes(),
		Telemetry:     r.bus,
		Logger:        &r.log,
	}
	if r.sandbox.on {
		base.Confine = r.confineKernel
	}
	opts := []actors.Option{actors.WithIntrospection(introspect.Config{QueueCapacity: r.cfg.MaxQueuedCellsPerKernel, Journal: r.journal})}
	if ext := r.clusterExtension(); ext != nil {
		opts = append(opts, actors.WithExtension(ext))
	}
	tree, err := actors.Start(cfg, base, approval.Config{Approver: r.approver, Telemetry: r.bus, Logger: &r.log}, opts...)
	if err != nil {
		return nil, err
	}
	r.tree = tree
	return tree, nil
}

// sessionRunner runs each call as a cell on its owner's kernel
// (docs/architecture.md, The life of a session cell). It gives up with a *notStarted only
// before any submitted code can have started.
type sessionRunner struct{ r *Runtime }

func (s sessionRunner) run(ctx context.Context, rn run) (outcome, error) {
	r, owner := s.r, rn.scope
	if owner != nil && owner.detached.Load() {
		return outcome{}, ErrDetached
	}
	if owner == nil {
		return outcome{}, &notStarted{step: stepScope, err: errNoScope}
	}
	key, err := r.keys.NewKey(owner.scope.SessionID, owner.scope.AgentID, r.rootDir, rn.python, r.helpers)
	if err != nil {
		return notRun(rn, ReasonInvalidSessionKey, "Script did not run: the session's kernel key is invalid ("+r.scrubError(err)+").", true, false), nil
	}
	key.ToolSet = r.toolsDigest
	key.Sandbox = r.sandboxKey()
	reqCtx, cancelReq := context.WithDeadline(ctx, rn.deadline)
	defer cancelReq()

	resetPerformed, err := s.reset(reqCtx, rn, key)
	var refused *resetRefused
	if errors.As(err, &refused) {
		return notRun(rn, ReasonResetFailed, "Script did not run: the session's kernel could not be reset ("+r.scrubError(err)+").", false, false), nil
	}
	if err != nil {
		return outcome{}, &notStarted{step: stepReset, err: err}
	}

	// The cell's caller context: queued wait and execution end with it.
	// The worker times the cell out at the deadline itself, queued or
	// running; the grace past it covers the kernel's end, which the
	// worker's answer waits for, and only a wedged worker meets it.
	cellCtx, cancelCell := context.WithDeadline(ctx, rn.deadline.Add(replyGrace))
	defer cancelCell()
	defer context.AfterFunc(r.base, cancelCell)()

	alloc, err := s.acquire(reqCtx, cellCtx, rn, key)
	if err != nil {
		return outcome{}, &notStarted{step: stepAcquire, err: err, resetPerformed: resetPerformed}
	}
	// Nothing waits for the release: the registry takes it before any
	// later request of this caller, and a release has nothing to report.
	defer owner.tree.Registry.ReleaseNoWait(alloc.Lease)
	if alloc.Remote {
		return s.runRemote(ctx, cellCtx, rn, alloc, resetPerformed)
	}

	// The bridge lives in the kernel's home, the one place a confined
	// kernel may write. A kernel that ended under the acquire has none.
	ws, releaseBridge, err := r.stageCellBridge(alloc.Workspace)
	if err != nil {
		return outcome{}, &notStarted{step: stepBridge, err: err, resetPerformed: resetPerformed}
	}
	defer releaseBridge()

	sc := r.cellScrubber(ws, alloc.Workspace)
	srv, err := s.serve(rn, ws, alloc, sc)
	if err != nil {
		return notRun(rn, ReasonRPCStartFailed, "Script did not run: its helper bridge could not start ("+sc.String(err.Error())+").", true, resetPerformed), nil
	}
	cs := &cellServer{r: r, srv: srv}
	defer cs.stop()

	o, neverReady := s.execute(ctx, cellCtx, rn, ws, alloc, sc)
	o.cell.reused, o.cell.resetPerformed = alloc.Reused, resetPerformed
	if o.ran {
		// The kernel started only once it had confined itself with all of
		// the plan (fail closed), so the plan is what is in force.
		o.sandbox = r.sandbox.plan
	}
	// No helper call outlives its cell.
	o.stats, o.blocks, err = cs.finish(ws, r.cfg.MaxTextBytes)
	o.statsLost = err != nil
	if neverReady {
		// Queued on a kernel that never became ready: nothing started. (A
		// kernel that died after it was ready is a dead worker, which the
		// seed says is never retried or fallen back.)
		return outcome{}, &notStarted{step: stepStart, err: registry.ErrStartupFailed, resetPerformed: resetPerformed}
	}
	return o, nil
}

// resetRefused is a reset the registry refused: the call ends unrun. Any
// other reset error (the registry did not answer, or could not confirm
// the old kernel gone) leaves running isolated.
type resetRefused struct{ err error }

func (e *resetRefused) Error() string { return e.err.Error() }
func (e *resetRefused) Unwrap() error { return e.err }

// reset discards the kernel of key when the call asks for it, and says
// whether there was one to discard.
func (s sessionRunner) reset(ctx context.Context, rn run, key registry.Key) (bool, error) {
	if !rn.call.Reset {
		return false, nil
	}
	rr, err := rn.scope.tree.Registry.Reset(ctx, key, rn.scope.owner)
	switch {
	case errors.Is(err, registry.ErrUnavailable), errors.Is(err, registry.ErrStopFailed):
		return false, err
	case err != nil:
		return false, &resetRefused{err}
	}
	return rr.Performed, nil
}

// acquire leases the kernel of key for the cell whose caller is cellCtx.
func (s sessionRunner) acquire(ctx, cellCtx context.Context, rn run, key registry.Key) (registry.Allocation, error) {
	r := s.r
	return rn.scope.tree.Registry.Acquire(ctx, registry.AcquireRequest{
		Key: key, Owner: rn.scope.owner, Caller: cellCtx,
		MaxLiveKernels: r.maxLiveKernels(), IdleTimeout: r.cfg.KernelIdleTimeout(),
		Worker: registry.WorkerOptions{
			InterpreterConfigured: rn.python,
			HelperSource:          r.helperSource,
			MaxQueuedCells:        r.cfg.MaxQueuedCellsPerKernel,
			MaxOutputBytes:        r.cfg.MaxOutputBytes,
			Limits:                kernelLimits(rn.limits),
		},
	})
}

// serve starts the cell's helper-call server on its bridge, with the
// kernel's doorbells.
func (s sessionRunner) serve(rn run, ws workspace, alloc registry.Allocation, sc *proc.Scrubber) (*pump.Server, error) {
	r := s.r
	cfg, err := r.cellGateConfig(rn)
	if err != nil {
		return nil, err
	}
	cfg.Dir, cfg.Token, cfg.Bells = ws.rpc, ws.token, alloc.Bells
	cfg.OnNotify, cfg.ScrubNotify = rn.call.Notify, sc.String
	cfg.OnAuthFailure, cfg.OnFrameRefused = r.bridgeDenied, r.bridgeDenied
	return pump.StartServer(cfg)
}

// cellGateConfig is what decides a session cell's helper calls, whether
// its pump is here (serve) or on a node (remoteGuard): the tools, the
// budgets, policy and approvals, and where round trips are counted.
func (r *Runtime) cellGateConfig(rn run) (pump.Config, error) {
	scope := rn.scope.scope
	policy, approvals, err := r.gate()
	if err != nil {
		return pump.Config{}, err
	}
	return pump.Config{
		Tools:    r.innerTools(rn),
		MaxCalls: r.cfg.MaxRPCCalls, MaxResultBytes: r.cfg.MaxRPCResultBytes, MaxParallel: r.cfg.MaxParallelRPC,
		Logger: &r.log, OnRoundTrip: r.metrics.ObserveRoundTrip,
		Policy: policy, Approvals: approvals,
		ApprovalContext: pump.ApprovalContext{SessionID: scope.SessionID, AgentID: scope.AgentID, Timeout: r.cfg.ApprovalTimeout(), Caller: rn.call.ApprovalTag},
	}, nil
}

// execute sends the cell to its kernel's worker and waits for the answer,
// or for the call, the deadline or the lease to end first; it says how the
// cell ended, and whether the worker answered that its kernel never became
// ready.
func (s sessionRunner) execute(ctx, cellCtx context.Context, rn run, ws workspace, alloc registry.Allocation, sc *proc.Scrubber) (o outcome, neverReady bool) {
	r := s.r
	return s.await(ctx, cellCtx, rn, alloc, sc, func(execCtx context.Context) <-chan kernelworker.CellResult {
		return alloc.Worker.Execute(execCtx, kernelworker.Cell{
			Code:      shimpy.RenderScript(rn.call.Script, r.helpers, r.specs...),
			Bridge:    &kernelworker.Bridge{Dir: ws.rpc, Token: ws.token, MaxTextBytes: r.cfg.MaxTextBytes},
			Scrub:     sc,
			Timeout:   max(time.Until(rn.deadline), time.Millisecond),
			Deadline:  rn.deadline,
			CPUBudget: time.Duration(r.cfg.CPULimitSeconds) * time.Second,
		})
	})
}

// await submits the cell (to a local worker or a remote kernel's proxy)
// and waits for its answer, or for the call, the deadline or the lease to
// end first: one wait for both, so a local and a remote cell end alike.
func (s sessionRunner) await(ctx, cellCtx context.Context, rn run, alloc registry.Allocation, sc *proc.Scrubber,
	submit func(execCtx context.Context) <-chan kernelworker.CellResult) (o outcome, neverReady bool) {
	r := s.r
	// The cell lives as long as both the call and the lease: the registry
	// ends the lease when its owner leaves, which takes a queued cell out
	// of the queue and discards the kernel under an active one.
	execCtx, cancelExec := context.WithCancel(cellCtx)
	defer cancelExec()
	defer context.AfterFunc(alloc.Lease.Context(), cancelExec)()
	reply := submit(execCtx)
	rn.call.Queued()

	var res kernelworker.CellResult
	replied, stopped, workerGone := false, endOK, false
	select {
	case res = <-reply:
		replied = true
	case <-execCtx.Done():
		switch {
		case ctx.Err() != nil || r.base.Err() != nil:
			stopped = endCancelled
		case cellCtx.Err() != nil:
			stopped = endTimeout
		case errors.Is(context.Cause(alloc.Lease.Context()), registry.ErrOwnerGone):
			stopped = endOwnerGone
		default:
			// The worker ended on its own (its kernel died): its answer,
			// if it gave one, says how the cell ended.
			workerGone = true
		}
		if stopped != endTimeout {
			// The worker answers once the kernel it discards is gone: no
			// process of the cell outlives the call. (A timed-out wait
			// already gave a wedged worker its grace.)
			t := time.NewTimer(replyGrace)
			select {
			case res = <-reply:
				replied = true
			case <-t.C:
			}
			t.Stop()
		}
	}
	if stopped == endOK && rn.scope.detached.Load() && endedByOwner(res) {
		// The owner detached under the cell: the worker's answer (the
		// kernel stopped, the queue dropped) is the detach's doing.
		stopped = endOwnerGone
	}
	o = outcome{ran: !replied || res.RequestID != "", scrub: sc, timeout: rn.timeout, started: rn.started,
		cell: &cellFacts{retained: replied && res.StateRetained}}
	if replied {
		o.output, o.killedBy, o.exception, o.exit = res.Output, KilledBy(res.KilledBy), res.Exception, res.Exit
	}
	switch stopped {
	case endCancelled:
		o.end, o.killedBy = endCancelled, KilledByCancelled
	case endTimeout:
		o.end, o.killedBy = endTimeout, KilledByTimeout
	case endOwnerGone:
		o.end, o.killedBy = endOwnerGone, KilledByOwnerGone
	default:
		if workerGone && !replied {
			o.end = endCrashed
			break
		}
		cellEnding(&o, res)
	}
	return o, replied && res.Reason == kernelworker.ReasonStartupFailed
}

// cellEnding says how a cell the worker answered ended. A SystemExit or a
// traceback extends the cell's output as python3 would.
func cellEnding(o *outcome, res kernelworker.CellResult) {
	exc := res.Exception
	switch res.Reason {
	case "":
		o.end, o.exitCode = endOK, intPtr(0)
	case kernelworker.ReasonException:
		if exc != nil && exc.Kind == "system_exit" {
			code, printed := systemExitCode(exc.Message)
			o.output.Text += printed
			o.end, o.exitCode = endExit, intPtr(code)
			return
		}
		code := 1
		if exc != nil && exc.Kind == "interrupted" {
			code = 128 + int(syscall.SIGINT) // python3 re-raises it as SIGINT on itself
		}
		if exc != nil {
			o.output.Text = withTraceback(o.output.Text, exc.Traceback)
		}
		o.end, o.exitCode = endException, intPtr(code)
	case kernelworker.ReasonPortExit:
		o.end = endCrashed
		if o.ran && res.Exit != nil {
			o.exitCode = intPtr(res.Exit.Code)
		}
	default:
		e, known := cellEndings[res.Reason]
		if !known {
			e, o.reason = endUnknown, Reason(res.Reason)
		}
		o.end = e
	}
}

// kernelLimits are the per-kernel rlimits: the CPU limit is a per-cell
// budget the worker manages with prlimit, so the hard limit stays open.
func kernelLimits(l proc.Limits) proc.Limits {
	l.CPUHardUnlimited = true
	return l
}

// notRun is a session call that failed around its cell before any code
// ran; retained says whether the kernel's state is untouched.
func notRun(rn run, reason Reason, note string, retained, resetPerformed bool) outcome {
	return outcome{end: endNotRun, reason: reason, note: note, timeout: rn.timeout, started: rn.started,
		cell: &cellFacts{retained: retained, resetPerformed: resetPerformed}}
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
