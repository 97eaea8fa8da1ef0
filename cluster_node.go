package executecode

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/tools"
)

// nodeHost is a kernel node's kernelhost.Host: each kernel is a worker of
// this runtime's tree, started by the tree's own starter, so the node's
// sandbox, limits, guard and Close cover it as any local kernel.
type nodeHost struct{ side *nodeSide }

func (h *nodeHost) StartKernel(ctx context.Context, incarnation string, req *wire.StartKernel) (kernelhost.Kernel, error) {
	n, r := h.side, h.side.r
	select {
	case <-n.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	python, err := r.interpreter()
	if err != nil {
		return nil, err
	}
	// The key is the node's own: its scope is the kernel's incarnation, so
	// no two kernels share anything; the session side's key stays there.
	key, err := r.keys.NewKey("node-"+incarnation, "node", r.rootDir, python, r.helpers)
	if err != nil {
		return nil, err
	}
	key.Sandbox = r.sandboxKey()
	l := req.Limits
	handle, err := n.local(ctx, key, req.Generation, registry.WorkerOptions{
		InterpreterConfigured: python,
		HelperSource:          req.HelperSource,
		MaxQueuedCells:        max(req.MaxQueuedCells, 1),
		MaxOutputBytes:        req.MaxOutputBytes,
		Limits: proc.Limits{CPUSeconds: l.CPUSeconds, MemoryMB: l.MemoryMB, FsizeMB: l.FsizeMB,
			NProc: l.NProc, CPUHardUnlimited: l.CPUHardUnlimited},
	})
	if err != nil {
		return nil, err
	}
	k := &nodeKernel{r: r, root: n.sys.Root, handle: handle, worker: kernelworker.NewClient(n.sys.Root, handle.PID),
		gone: make(chan struct{})}
	// The worker's end, whatever ends it, ends every wait on it.
	gone := k.gone
	n.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Watch(handle.PID)
		case *actor.Terminated:
			if m.Who.Equal(handle.PID) {
				close(gone)
				c.Stop(c.Self())
			}
		}
	}))
	return k, nil
}

// nodeKernel is one kernel of the node.
type nodeKernel struct {
	r      *Runtime
	root   *actor.RootContext
	handle kernelworker.Handle
	worker kernelworker.Client
	gone   chan struct{}
}

// Run runs one cell as the session side's local branch would, with the
// pump's dispatch forwarded to the session side: the file bridge, its
// claims and the kernel are here, every decision about a call is there.
func (k *nodeKernel) Run(ctx context.Context, cell *wire.RunCell, gate kernelhost.Gate, notify func(string)) *wire.CellResult {
	r := k.r
	ws, releaseBridge, err := r.stageCellBridge(k.handle.Workspace)
	if err != nil {
		return &wire.CellResult{Reason: kernelworker.ReasonKernelDiscarded}
	}
	defer releaseBridge()
	sc := r.cellScrubber(ws, k.handle.Workspace)
	srv, err := pump.StartServer(pump.Config{
		Dir: ws.rpc, Token: ws.token, Gate: kernelhost.PumpGate(gate), Available: cell.Tools,
		MaxCalls: cell.MaxCalls, MaxResultBytes: cell.MaxResultBytes, MaxParallel: max(cell.MaxParallel, 1),
		OnNotify: notify, ScrubNotify: sc.String, Bells: k.handle.Bells, Logger: &r.log,
		OnAuthFailure: r.bridgeDenied, OnFrameRefused: r.bridgeDenied,
		Policy: policyOf(cell.Policy),
	})
	if err != nil {
		return &wire.CellResult{Reason: kernelworker.ReasonInvalidRequest, StateRetained: true}
	}
	cs := &cellServer{r: r, srv: srv}
	defer cs.stop()

	deadline := time.UnixMilli(cell.DeadlineUnixMS)
	reply := k.worker.Execute(ctx, kernelworker.Cell{
		Code:      cell.Code,
		Bridge:    &kernelworker.Bridge{Dir: ws.rpc, Token: ws.token, MaxTextBytes: cell.MaxTextBytes},
		Scrub:     sc,
		Timeout:   max(time.Duration(cell.TimeoutMS)*time.Millisecond, time.Millisecond),
		Deadline:  deadline,
		CPUBudget: time.Duration(cell.CPUBudgetMS) * time.Millisecond,
	})
	var res kernelworker.CellResult
	replied := false
	select {
	case res = <-reply:
		replied = true
	case <-k.gone:
	case <-ctx.Done():
		// Cancelled: the worker discards the kernel and answers once it is
		// gone, within its grace.
		t := time.NewTimer(replyGrace)
		select {
		case res = <-reply:
			replied = true
		case <-k.gone:
		case <-t.C:
		}
		t.Stop()
	}
	stats, blocks, serr := cs.finish(ws, cell.MaxTextBytes)
	out := &wire.CellResult{Stats: wireStats(stats, serr != nil), Blocks: blocks}
	if !replied {
		out.Reason, out.KilledBy = kernelworker.ReasonKernelDiscarded, ""
		return out
	}
	out.Reason, out.RequestID, out.StateRetained = res.Reason, res.RequestID, res.StateRetained
	out.Output, out.OutputTruncated = res.Output.Text, res.Output.Truncated
	out.KilledBy, out.DroppedLateOutput = res.KilledBy, res.DroppedLateOutput
	if e := res.Exception; e != nil {
		out.Exception = &wire.Exception{Kind: e.Kind, Name: e.Name, Message: e.Message, Traceback: e.Traceback}
	}
	if e := res.Exit; e != nil {
		out.Exit = &wire.Exit{Code: e.Code}
		if e.Signaled {
			out.Exit.Signal = e.Signal.String()
		}
	}
	return out
}

// Stop ends the kernel's worker and waits for it.
func (k *nodeKernel) Stop(ctx context.Context) {
	k.root.Send(k.handle.PID, &kernelworker.Stop{Reason: kernelworker.KilledByShutdown})
	select {
	case <-k.gone:
	case <-ctx.Done():
		k.root.Stop(k.handle.PID)
	}
}

func wireStats(s pump.Stats, lost bool) wire.Stats {
	return wire.Stats{Calls: s.Calls, Denied: s.Denied, Errors: s.Errors, Bytes: s.Bytes, ToolsUsed: s.SortedTools(),
		Notified: s.NotifyForwarded, AccountingLoss: s.AccountingLoss, Untrusted: s.Untrusted, Lost: lost}
}

// policyOf is the session side's policy as the node applies it at claim
// time (the session side applies it again); nil for none.
func policyOf(p wire.Policy) pump.Policy {
	tp := tools.Policy{Allow: p.Allow, Deny: p.Deny, RequireApproval: p.RequireApproval}
	if tp.IsZero() {
		return nil
	}
	return tp
}
