package executecode

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/placement"
	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/shimpy"
)

// runRemote runs a cell on a kernel of another node (docs/cluster.md,
// Flows): there is no bridge and no pump here; the node's pump sends each
// claimed helper call back through the cell's gate, which applies this
// runtime's policy, approvals and budgets again and counts the call here.
// The wait and the ending are the local cell's (await, cellEnding).
func (s sessionRunner) runRemote(ctx, cellCtx context.Context, rn run, alloc registry.Allocation, resetPerformed bool) (outcome, error) {
	r := s.r
	side, _ := r.cluster.side.(*sessionSide)
	guard, err := r.remoteGuard(rn)
	if err != nil {
		return notRun(rn, ReasonRPCStartFailed, "Script did not run: its helper bridge could not start ("+r.scrubError(err)+").", true, resetPerformed), nil
	}
	// The node scrubbed its own paths; this one covers the staging root
	// here, which a tool's answer could name.
	sc := newScrubber(r.scrubRoot(), "")
	policy := r.cfg.Policy()
	cell := placement.Cell{
		Run: wire.RunCell{
			Code:           shimpy.RenderScript(rn.call.Script, r.helpers, r.specs...),
			TimeoutMS:      max(time.Until(rn.deadline), time.Millisecond).Milliseconds(),
			DeadlineUnixMS: rn.deadline.UnixMilli(),
			CPUBudgetMS:    int64(r.cfg.CPULimitSeconds) * 1000,
			Tools:          r.helpers,
			Policy:         wire.Policy{Allow: policy.Allow, Deny: policy.Deny, RequireApproval: policy.RequireApproval},
			MaxCalls:       r.cfg.MaxRPCCalls,
			MaxResultBytes: r.cfg.MaxRPCResultBytes,
			MaxParallel:    r.cfg.MaxParallelRPC,
			MaxTextBytes:   r.cfg.MaxTextBytes,
		},
		Gate:   kernelhost.SessionGate(guard),
		Notify: rn.call.Notify,
	}
	// What the node answered besides the cell's ending, set before its
	// answer is handed on: read only after the wait, which may have given
	// up on the answer.
	var answered atomic.Pointer[nodeAnswer]
	done := make(chan struct{})
	defer close(done)
	o, neverReady := s.await(ctx, cellCtx, rn, alloc, sc, func(execCtx context.Context) <-chan kernelworker.CellResult {
		reply := side.cluster.Execute(execCtx, alloc.Worker.PID(), cell)
		out := make(chan kernelworker.CellResult, 1)
		go func() {
			select {
			case res := <-reply:
				answered.Store(&nodeAnswer{blocks: capBlocks(res.Blocks, r.cfg.MaxTextBytes), lost: res.Stats.Lost})
				out <- fromWire(res)
			case <-done:
			}
		}()
		return out
	})
	o.cell.reused, o.cell.resetPerformed = alloc.Reused, resetPerformed
	// The figures are this side's own; a call still running here when the
	// cell ended, or a node that could not drain its pump, makes them
	// untrusted, as a local cell's interrupted calls do.
	o.stats = guard.Stats()
	o.statsLost = len(guard.Unanswered()) > 0
	o.blocks = []string{}
	if a := answered.Load(); a != nil {
		o.blocks = a.blocks
		o.statsLost = o.statsLost || a.lost
	}
	if neverReady {
		return outcome{}, &notStarted{step: stepStart, err: registry.ErrStartupFailed, resetPerformed: resetPerformed}
	}
	return o, nil
}

// nodeAnswer is what a node's CellResult carries besides its ending.
type nodeAnswer struct {
	blocks []string
	lost   bool
}

// fromWire is a node's CellResult as the local worker would have given it.
func fromWire(w *wire.CellResult) kernelworker.CellResult {
	res := kernelworker.CellResult{
		RequestID: w.RequestID, Reason: w.Reason, StateRetained: w.StateRetained, KilledBy: w.KilledBy,
		Output:            proc.Output{Text: w.Output, Truncated: w.OutputTruncated, TotalBytes: int64(len(w.Output))},
		DroppedLateOutput: w.DroppedLateOutput,
	}
	if e := w.Exception; e != nil {
		res.Exception = &kernelworker.Exception{Kind: e.Kind, Name: e.Name, Message: e.Message, Traceback: e.Traceback}
	}
	if e := w.Exit; e != nil {
		res.Exit = &proc.ExitStatus{Code: e.Code}
		if e.Signal != "" {
			res.Exit.Signaled = true
			res.Exit.Signal = signalNamed(e.Signal)
		}
	}
	return res
}

// signalNamed is the signal whose String() is name; SIGKILL for a name
// no signal has (a node can only have sent a real one).
func signalNamed(name string) syscall.Signal {
	for sig := syscall.Signal(1); sig < 65; sig++ {
		if sig.String() == name {
			return sig
		}
	}
	return syscall.SIGKILL
}

// capBlocks keeps a node's text blocks within the cell's text budget,
// whatever the node sent: the budget is this side's to enforce.
func capBlocks(blocks []string, maxTextBytes int) []string {
	out := make([]string, 0, len(blocks))
	left := maxTextBytes
	for _, b := range blocks {
		if len(b) > left {
			break
		}
		left -= len(b)
		out = append(out, b)
	}
	return out
}

// remoteGuard is the gate a remote cell's helper calls run through here:
// the local gate a cell's pump would have, guarded, so that this side
// decides every call again on its own figures (pump.GuardedGate).
func (r *Runtime) remoteGuard(rn run) (*pump.GuardedGate, error) {
	cfg, err := r.cellGateConfig(rn)
	if err != nil {
		return nil, err
	}
	return pump.NewGuardedGate(cfg), nil
}
