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

	"github.com/executecode/executecode/kernelworker"
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
	// tokenFile is a per-call run's child end of the socket holding the
	// token: python's last ExtraFile (fd tokenFD), closed by the host once
	// python has its copy.
	tokenFile *os.File
	tokenFD   int
}

// stage builds the workspace (docs/protocol.md, Layout and teardown):
// base → rpc dir → shim →
// script, each created privately, and the socket that hands python the
// token. The token is never written to the workspace or the environment:
// any process of the user can read those of another run. Any failure
// removes the base and closes the socket.
func (r *Runtime) stage(root *privatetmp.Root, script string, bells bool) (ws workspace, err error) {
	ws.base, err = privatetmp.ReserveDir(root.Path(), "lemon-exec-code")
	if err != nil {
		return ws, err
	}
	defer func() {
		if err != nil {
			_, _ = privatetmp.RemoveBounded(ws.base, privatetmp.RemoveLimit)
			if ws.tokenFile != nil {
				_ = ws.tokenFile.Close()
			}
		}
	}()
	if ws.rpc, err = privatetmp.ReserveDir(ws.base, "rpc"); err != nil {
		return ws, err
	}
	if ws.token, err = pump.NewToken(); err != nil {
		return ws, err
	}
	if ws.tokenFile, err = shimpy.TokenSocket(ws.token); err != nil {
		return ws, err
	}
	var b *shimpy.Bells
	ws.tokenFD = 3
	if bells {
		b = childBells
		ws.tokenFD = 5
	}
	module := shimpy.RenderPrelude(ws.rpc, ws.tokenFD, r.cfg.Tools, r.cfg.MaxTextBytes, b)
	if err = privatetmp.WriteFile(ws.base, shimpy.ModuleName+".py", []byte(module)); err != nil {
		return ws, err
	}
	err = privatetmp.WriteFile(ws.base, "script.py", []byte(shimpy.RenderScript(script, r.cfg.Tools)))
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

// innerTools is the helper map the pump may dispatch to: the configured
// subset of the allowlist, never more.
func (r *Runtime) innerTools() map[string]tools.Tool {
	m := make(map[string]tools.Tool, len(r.cfg.Tools))
	for _, name := range r.cfg.Tools {
		if t, ok := r.tools[name]; ok {
			m[name] = t
		}
	}
	return m
}

// runOutcome is what a per-call run ended with, before formatting.
type runOutcome struct {
	exit      kernelworker.ExitStatus
	out       kernelworker.Output
	blocks    []string
	stats     pump.Stats
	exc       pump.Exception
	timedOut  bool
	cancelled bool
	timeout   time.Duration
}

// runPerCall runs the script in a fresh interpreter (docs/architecture.md,
// The life of a per-call run).
// Teardown (bells, workspace, spill liveness) runs on every path.
func (r *Runtime) runPerCall(ctx context.Context, call Call, python string) (Result, error) {
	started := time.Now()
	timeout := r.effectiveTimeout(call.TimeoutMS)
	// Policy and approvals are settled before anything exists.
	policy, approvals, err := r.gate()
	if err != nil {
		return Result{}, fmt.Errorf("execute_code could not start its approval broker: %w", err)
	}
	rs, err := r.staging()
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s", ErrWorkspace, r.scrubError(err))
	}
	root := rs.work
	ws, err := r.stage(root, call.Script, r.wakeups)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s", ErrWorkspace, r.scrubError(err))
	}
	defer privatetmp.Teardown(ws.base, privatetmp.LabelWorkspace, &r.log)
	closeToken := sync.OnceFunc(func() { _ = ws.tokenFile.Close() })
	defer closeToken()

	var bells *pump.Bells
	if r.wakeups {
		if bells, err = pump.NewBells(); err != nil {
			return Result{}, fmt.Errorf("%w: doorbells: %w", ErrWorkspace, err)
		}
		defer bells.Close()
	}

	// One scrubber for everything this run can make the host say; the
	// capture applies it as the output streams in, before it is cut or
	// spilled.
	sc := r.runScrubber(ws)

	// NewSpill registers the spill as live, so the reaper leaves it alone
	// until the capture is finished.
	capture := kernelworker.NewCapture(r.cfg.MaxOutputBytes, r.newSpill,
		kernelworker.ScrubWith(sc), kernelworker.SpillLimit(r.cfg.SpillLimitBytes()))
	defer func() {
		_ = capture.Close()
		if p := capture.Result().SpillPath; p != "" {
			r.releaseSpill(p)
		}
	}()

	// The run's context ends at the deadline, on the caller's cancel, or
	// when the runtime closes.
	runCtx, cancelRun := context.WithTimeout(ctx, timeout)
	defer cancelRun()
	stopOnClose := context.AfterFunc(r.base, cancelRun)
	defer stopOnClose()

	cmd := kernelworker.Command{
		Path:   python,
		Args:   []string{filepath.Join(ws.base, "script.py")},
		Dir:    r.rootDir,
		Env:    append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"),
		Limits: r.limits(),
		Output: capture,
	}
	if bells != nil {
		cmd.ExtraFiles = bells.ChildFiles()
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, ws.tokenFile)
	proc, err := r.spawner.Start(runCtx, cmd)
	if bells != nil {
		_ = bells.CloseChildEnds()
	}
	closeToken()
	if err != nil {
		return Result{}, fmt.Errorf("execute_code runner crashed: %s", sc.String(err.Error()))
	}

	// Kill the whole group the moment the run's context ends; remember
	// why, so the result can say so.
	var killed atomic.Bool
	stopKill := context.AfterFunc(runCtx, func() {
		killed.Store(true)
		proc.Kill()
	})
	defer stopKill()

	pcfg := pump.Config{
		Policy:          policy,
		Approvals:       approvals,
		ApprovalContext: pump.ApprovalContext{Timeout: r.cfg.ApprovalTimeout(), Caller: call.ApprovalTag},
		Dir:             ws.rpc,
		Token:           ws.token,
		Tools:           r.innerTools(),
		MaxCalls:        r.cfg.MaxRPCCalls,
		MaxResultBytes:  r.cfg.MaxRPCResultBytes,
		MaxParallel:     r.cfg.MaxParallelRPC,
		OnNotify:        call.Notify,
		ScrubNotify:     sc.String,
		OnFrameRefused:  r.bridgeDenied,
		OnRoundTrip:     r.metrics.ObserveRoundTrip,
		Bells:           bells,
		Logger:          &r.log,
	}
	stats := pump.Serve(runCtx, pcfg, proc.Done())
	<-proc.Done()

	o := runOutcome{
		exit:    proc.Exit(),
		stats:   stats,
		timeout: timeout,
		blocks:  pump.ReadTextBlocks(ws.rpc, ws.token, r.cfg.MaxTextBytes, r.bridgeDenied),
	}
	o.exc, _ = pump.ReadException(ws.rpc, ws.token, r.bridgeDenied)
	if killed.Load() {
		switch {
		case ctx.Err() != nil || r.base.Err() != nil:
			o.cancelled = true
		case errors.Is(runCtx.Err(), context.DeadlineExceeded):
			o.timedOut = true
		}
	}
	o.out = capture.Result()

	res := r.formatPerCall(o, sc)
	var exitCode *int
	if res.Details != nil {
		exitCode = res.Details.ExitCode
	}
	r.bus.Emit(telemetry.ExecuteCodeStop{Duration: time.Since(started), RPCCalls: stats.Calls, RPCDenied: stats.Denied, ExitCode: exitCode})
	return res, nil
}

func (r *Runtime) limits() kernelworker.Limits {
	return kernelworker.Limits{
		CPUSeconds: r.cfg.CPULimitSeconds,
		MemoryMB:   r.cfg.MemoryLimitMB,
		FsizeMB:    r.cfg.FsizeLimitMB,
		NProc:      r.cfg.NprocLimit,
	}
}

// formatPerCall builds the model-visible result of a per-call run
// (README.md, The result).
//
// The output was scrubbed as it streamed; the blocks are scrubbed here, by
// the same scrubber.
func (r *Runtime) formatPerCall(o runOutcome, sc *kernelworker.Scrubber) Result {
	d := &Details{
		Truncated: o.out.Truncated,
		RPCCalls:  o.stats.Calls,
		RPCDenied: o.stats.Denied,
		RPCErrors: o.stats.Errors,
		RPCBytes:  o.stats.Bytes,
		RPCTools:  append([]string{}, o.stats.SortedTools()...),
	}
	sp := spillOf(o.out)
	d.FullOutputPath = sp.path
	out := o.out.Text
	blocks := scrubAll(sc, o.blocks)

	var headline string
	switch {
	case o.cancelled:
		headline, d.KilledBy = cancelledLine, "cancelled"
	case o.timedOut:
		headline, d.KilledBy = fmt.Sprintf("Script timed out after %dms.", o.timeout.Milliseconds()), "timeout"
	default:
		code := o.exit.Code
		d.ExitCode = &code
		d.KilledBy = kernelworker.KilledBy(o.exit, r.limits(), o.exc.Type, o.exc.Errno, false, false)
		if h := kernelworker.LimitHeadline(d.KilledBy, r.limits(), o.exit); h != "" {
			headline = h
		} else if code != 0 {
			headline = fmt.Sprintf("Script exited with code %d", code)
		}
	}

	var text string
	if len(blocks) > 0 {
		text = assemble(headline, blocks, out, sp)
	} else {
		text = historicText(headline, out, sp, o.cancelled || o.timedOut)
	}
	trust := Trusted
	if _, web := o.stats.ToolsUsed[tools.Webfetch]; web || o.stats.Untrusted {
		trust = Untrusted
	}
	return textResult(text, d, trust, blocks)
}

// historicText is the stdout-only result of a run without text() blocks
// (README.md, The result), kept byte-for-byte.
func historicText(headline, out string, sp spillNote, stopped bool) string {
	body := withMarker(out, sp)
	switch {
	case stopped:
		if body == "" {
			return headline
		}
		return headline + "\n\n" + body
	case headline == "":
		if out == "" {
			return noOutput
		}
		return body
	case out == "":
		return headline
	default:
		return body + "\n\n" + headline
	}
}
