package executecode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/privatetmp"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/shimpy"
	"github.com/executecode/executecode/telemetry"
	"github.com/executecode/executecode/tools"
)

// childBells are the fds the per-call shim finds its doorbells at: the
// runner passes them as the first two ExtraFiles.
var childBells = &shimpy.Bells{Request: 3, Response: 4}

// workspace is one per-call run's private staging: base dir, rpc dir and
// the bridge token. Its paths never reach the model (see scrubber).
type workspace struct {
	base, rpc, token string
	// runFile is a per-call run's child end of the socket holding its
	// token, rpc dir and bells: python's last ExtraFile (fd
	// runConfigFD), closed by the host once python has its copy.
	runFile *os.File
}

// runConfigFD is where a per-call shim reads its run's configuration:
// after the doorbells (fds 3 and 4) when there are any.
func (r *Runtime) runConfigFD() int {
	if r.wakeups {
		return 5
	}
	return 3
}

// stage builds the workspace (docs/protocol.md, Layout and teardown): base →
// rpc dir → shim → script, each created privately, and the socket that hands
// python the token, the rpc dir and the bells. The shim is the runtime's
// one per-call module (perCallModule), whose bytecode the interpreter made
// ahead; nothing of the run is in it. The token is never written to the
// workspace or the environment: any process of the user can read those of
// another run. Any failure removes the base and closes the socket.
func (r *Runtime) stage(root *privatetmp.Root, script string) (ws workspace, err error) {
	ws.base, err = privatetmp.ReserveDir(root.Path(), "exec-code")
	if err != nil {
		return ws, err
	}
	defer func() {
		if err != nil {
			_, _ = privatetmp.RemoveBounded(ws.base, privatetmp.RemoveLimit)
			if ws.runFile != nil {
				_ = ws.runFile.Close()
			}
		}
	}()
	if ws.rpc, err = privatetmp.ReserveDir(ws.base, "rpc"); err != nil {
		return ws, err
	}
	if ws.token, err = pump.NewToken(); err != nil {
		return ws, err
	}
	run := shimpy.RunConfig{Token: ws.token, Dir: ws.rpc}
	if r.wakeups {
		run.Bells = childBells
	}
	if ws.runFile, err = shimpy.RunSocket(run); err != nil {
		return ws, err
	}
	if err = privatetmp.WriteFile(ws.base, shimpy.ModuleName+".py", []byte(r.perCallModule)); err != nil {
		return ws, err
	}
	err = privatetmp.WriteFile(ws.base, "script.py", []byte(shimpy.RenderScript(script, r.helpers, r.specs...)))
	return ws, err
}

// effectiveTimeout clamps a call's timeout_ms to [1 s, the configured
// timeout]; 0 means the configured one.
func (r *Runtime) effectiveTimeout(ms int) time.Duration {
	limit := r.cfg.Timeout()
	if ms == 0 {
		return limit
	}
	return min(limit, max(minTimeout, time.Duration(ms)*time.Millisecond))
}

// innerTools is the helper map the pump may dispatch to for rn: the
// reachable helpers, never more, an MCP tool's calls bounded by the run's
// deadline (deadlined).
func (r *Runtime) innerTools(rn run) map[string]tools.Tool {
	owner := spillOwnerOf(rn)
	m := make(map[string]tools.Tool, len(r.helpers))
	for _, name := range r.helpers {
		if t, ok := r.tools[name]; ok {
			m[name] = t
			if r.mcpTools[name] {
				m[name] = deadlined{Tool: t, deadline: rn.deadline.Add(-callReserve(rn.timeout))}
			}
		}
	}
	if t, ok := m[tools.Read]; ok {
		m[tools.Read] = spillReader{Tool: t, open: func(name string) (*os.File, error) {
			return r.openSpillFor(owner, name)
		}}
	}
	return m
}

// perCallRunner runs each call in a fresh interpreter
// (docs/architecture.md, The life of a per-call run).
type perCallRunner struct{ r *Runtime }

// run stages the workspace, starts python3 on it, serves its helper calls
// until it exits or the run's context ends, and reads what it left.
// Teardown (bells, workspace, spill liveness) runs on every path.
func (p perCallRunner) run(ctx context.Context, rn run) (outcome, error) {
	r := p.r
	// A per-call run, an isolated one included, takes no place in a
	// kernel's FIFO: it has its place as soon as it begins.
	rn.call.Queued()
	// Policy and approvals are settled before anything exists.
	policy, approvals, err := r.gate()
	if err != nil {
		return outcome{}, fmt.Errorf("execute_code could not start its approval broker: %w", err)
	}
	rs, err := r.staging()
	if err != nil {
		return outcome{}, fmt.Errorf("%w: %s", ErrWorkspace, r.scrubError(err))
	}
	ws, err := r.stage(rs.work, rn.call.Script)
	if err != nil {
		return outcome{}, fmt.Errorf("%w: %s", ErrWorkspace, r.scrubError(err))
	}
	defer privatetmp.Teardown(ws.base, privatetmp.LabelWorkspace, &r.log)
	closeToken := sync.OnceFunc(func() { _ = ws.runFile.Close() })
	defer closeToken()

	var bells *bell.Pair
	if r.wakeups {
		if bells, err = bell.New(); err != nil {
			return outcome{}, fmt.Errorf("%w: doorbells: %w", ErrWorkspace, err)
		}
		defer bells.Close()
	}

	// One scrubber for everything this run can make the host say; the
	// capture applies it as the output streams in, before it is cut or
	// spilled.
	sc := r.runScrubber(ws)

	// The run's context ends at the deadline, on the caller's cancel, or
	// when the runtime closes.
	runCtx, cancelRun := context.WithTimeout(ctx, rn.timeout)
	defer cancelRun()
	stopOnClose := context.AfterFunc(r.base, cancelRun)
	defer stopOnClose()

	proc, capture, err := p.spawn(runCtx, rn, ws, bells, sc)
	closeToken()
	if isSandboxError(err) {
		// Fail closed: never run unconfined what was to be confined.
		return outcome{}, sandboxError(err, sc.String)
	}
	if err != nil {
		return outcome{}, fmt.Errorf("execute_code runner crashed: %s", sc.String(err.Error()))
	}
	defer r.closeCapture(capture)

	// Kill the whole group the moment the run's context ends; remember
	// why, so the result can say so.
	var killed atomic.Bool
	stopKill := context.AfterFunc(runCtx, func() {
		killed.Store(true)
		proc.Kill()
	})
	defer stopKill()

	// The bridge serves until the interpreter exits, not until its output
	// is drained: a call published after the exit (by a descendant that
	// escaped) is tool work nobody waits for (docs/protocol.md).
	stats := r.servePerCall(runCtx, p.bridge(rn, ws, bells, sc, policy, approvals), proc.Exited())
	<-proc.Done()

	o := outcome{ran: true, stats: stats, scrub: sc, timeout: rn.timeout, started: rn.started, sandbox: proc.Sandbox(),
		blocks: pump.ReadTextBlocks(ws.rpc, ws.token, r.cfg.MaxTextBytes, r.bridgeDenied)}
	exc, _ := pump.ReadException(ws.rpc, ws.token, r.bridgeDenied)
	switch {
	case killed.Load() && (ctx.Err() != nil || r.base.Err() != nil):
		o.end, o.killedBy = endCancelled, KilledByCancelled
	case killed.Load() && errors.Is(runCtx.Err(), context.DeadlineExceeded):
		o.end, o.killedBy = endTimeout, KilledByTimeout
	default:
		exitEnding(&o, proc.Exit(), rn.limits, exc)
	}
	o.output = capture.Result()
	r.bus.Emit(telemetry.ExecuteCodeStop{Duration: time.Since(rn.started), RPCCalls: stats.Calls, RPCDenied: stats.Denied, ExitCode: o.exitCode})
	return o, nil
}

// exitEnding says how a run that ended on its own ended: a limit or a
// signal may explain its exit (killed), else its exit code does.
func exitEnding(o *outcome, exit proc.ExitStatus, lim proc.Limits, exc pump.Exception) {
	o.exit, o.exitCode = &exit, intPtr(exit.Code)
	o.killedBy = KilledBy(proc.KilledBy(exit, lim, exc.Type, exc.Errno))
	switch {
	case o.killedBy != "":
		o.end = endKilled
	case exit.Code != 0:
		o.end = endExit
	}
}

// spawn starts python3 on the workspace's script, with the doorbells and
// the token socket as its extra files, and closes the child's ends of the
// doorbells once python3 has them. Its output streams into the returned
// capture, scrubbed by sc, which the caller closes with closeCapture.
func (p perCallRunner) spawn(ctx context.Context, rn run, ws workspace, bells *bell.Pair, sc *proc.Scrubber) (*proc.Process, *proc.Capture, error) {
	r := p.r
	// NewSpill registers the spill as live, so the reaper leaves it alone
	// until the capture is finished.
	capture := proc.NewCapture(r.cfg.MaxOutputBytes, r.newSpill,
		proc.ScrubWith(sc), proc.SpillLimit(r.cfg.SpillLimitBytes()))
	cmd := r.perCallCommand(rn.python, rn.limits)
	cmd.Main = filepath.Join(ws.base, "script.py")
	cmd.Output = capture
	if bells != nil {
		cmd.ExtraFiles = bells.ChildFiles()
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, ws.runFile)
	sb, err := r.confine(ctx, rn.python, ws.base, ws.base)
	if err != nil {
		r.closeCapture(capture)
		return nil, nil, err
	}
	cmd.Sandbox = sb
	proc, err := r.spawner.Start(ctx, cmd)
	if bells != nil {
		_ = bells.CloseChildEnds()
	}
	if err != nil {
		r.closeCapture(capture)
		return nil, nil, err
	}
	return proc, capture, nil
}

// perCallCommand is the command of every per-call run of python under
// lim but for what is the run's own (its script, descriptors, output and
// the sandbox's rules): python3 on script.py in the tool root, the
// host's environment without bytecode writing, the helper set as its
// tag, and the per-call module, which the interpreter compiles ahead
// (once per runtime: see proc.Command's Module) and leaves as its checked
// bytecode cache beside script.py. A warm interpreter of this shape
// serves the runs (see warm).
func (r *Runtime) perCallCommand(python string, lim proc.Limits) proc.Command {
	cmd := proc.Command{
		Path:   python,
		Main:   "script.py",
		Dir:    r.rootDir,
		Env:    append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"),
		Limits: lim,
		Tag:    "per-call " + r.toolsDigest,
		Module: proc.ModuleSource{Name: shimpy.ModuleName + ".py", Source: r.perCallModule},
	}
	if r.sandbox.on {
		cmd.Sandbox = &proc.Sandbox{}
	}
	return cmd
}

// closeCapture ends a capture and lets the reaper have its spill.
func (r *Runtime) closeCapture(capture *proc.Capture) {
	_ = capture.Close()
	if p := capture.Result().SpillPath; p != "" {
		r.releaseSpill(p)
	}
}

// bridge is the configuration of the run's helper-call pump.
func (p perCallRunner) bridge(rn run, ws workspace, bells *bell.Pair, sc *proc.Scrubber, policy pump.Policy, approvals *approval.Broker) pump.Config {
	r := p.r
	return pump.Config{
		Policy:          policy,
		Approvals:       approvals,
		ApprovalContext: pump.ApprovalContext{Timeout: r.cfg.ApprovalTimeout(), Caller: rn.call.ApprovalTag},
		Dir:             ws.rpc,
		Token:           ws.token,
		Tools:           r.innerTools(rn),
		MaxCalls:        r.cfg.MaxRPCCalls,
		MaxResultBytes:  r.cfg.MaxRPCResultBytes,
		MaxParallel:     r.cfg.MaxParallelRPC,
		OnNotify:        rn.call.Notify,
		ScrubNotify:     sc.String,
		OnAuthFailure:   r.bridgeDenied,
		OnFrameRefused:  r.bridgeDenied,
		OnRoundTrip:     r.metrics.ObserveRoundTrip,
		Bells:           bells,
		Logger:          &r.log,
	}
}

// servePerCall answers the run's helper calls until done is closed or
// ctx ends, and returns their accounting.
func (r *Runtime) servePerCall(ctx context.Context, cfg pump.Config, done <-chan struct{}) pump.Stats {
	return pump.StartRun(ctx, cfg, done).Wait()
}
