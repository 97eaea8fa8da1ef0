package kernelworker

import (
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/telemetry"
)

// How a kernel ends: cancellation, other failures, external stop
// (docs/architecture.md, The kernel worker), and the teardown they all
// finish with.

const crashEscalation = telemetry.CrashCancellationEscalation

// beginCancel discards the kernel under the active cell, whose caller was
// already answered: SIGINT to the group, and a grace for the runner to
// report the cell done.
func (w *worker) beginCancel(ctx actor.Context, cause telemetry.CancelCause) {
	w.disarm(timerCell)
	w.enter(phaseCancelling)
	w.emitCancel(w.active, cause)
	w.failQueued(ReasonKernelDiscarded)
	w.k.proc.Signal(syscall.SIGINT)
	w.arm(timerGrace, w.opts.InterruptGrace)
}

// requestShutdown writes the shutdown request; the runner answers bye.
func (w *worker) requestShutdown() {
	if line, err := requestLine(map[string]any{"v": 1, "type": "shutdown"}); err == nil {
		w.k.stdin.send(line)
	}
}

// onStop is the external stop (docs/architecture.md, External stop) without
// blocking the actor: each wait is a phase with a timer that ends at the
// frame (or exit) it waits for.
func (w *worker) onStop(ctx actor.Context, reason string) {
	p := w.phase
	if p != phaseStarting && p != phaseIdle && p != phaseRunning && p != phaseCancelling && p != phaseClosing {
		return // already stopping
	}
	if reason == "" {
		reason = KilledByShutdown
	}
	w.decide("")
	w.disarmAll()
	c := w.active
	if c != nil && (p == phaseRunning || p == phaseCancelling) {
		w.emitCancel(c, telemetry.CauseShutdown)
	}
	w.replyActive(CellResult{Reason: ReasonInterrupted, KilledBy: reason}, telemetry.OutcomeInterrupted)
	w.failQueued(ReasonShuttingDown)

	switch p {
	case phaseStarting:
		w.hardTeardown(ctx, "")
	case phaseRunning:
		w.k.proc.Signal(syscall.SIGINT)
		w.enter(phaseHalting)
		w.arm(timerHalt, w.opts.InterruptGrace)
	case phaseCancelling:
		// SIGINT went out already; wait out the same grace for done.
		w.enter(phaseHalting)
		w.arm(timerHalt, w.opts.InterruptGrace)
	case phaseClosing:
		// shutdown went out already; wait for its bye.
		w.enter(phaseHaltBye)
		w.arm(timerHalt, w.opts.ByeTimeout)
	default:
		w.haltShutdown(ctx)
	}
}

// haltShutdown asks a live runner to shut down and waits a bye timeout.
func (w *worker) haltShutdown(ctx actor.Context) {
	if !w.k.proc.Alive() {
		w.hardTeardown(ctx, "")
		return
	}
	w.requestShutdown()
	w.enter(phaseHaltBye)
	w.arm(timerHalt, w.opts.ByeTimeout)
}

// onStartupTimeout: no ready within the startup timeout.
func (w *worker) onStartupTimeout(ctx actor.Context) {
	w.log.Warn().Str("stderr", w.k.stderr.String()).Msg("kernel not ready within the startup timeout")
	w.failQueued(ReasonStartupFailed)
	w.hardTeardown(ctx, telemetry.CrashStartupFailure)
}

// portExit: the interpreter died on its own. Its group was killed before
// it was reaped (docs/architecture.md, Rules: no survivors), so no signal
// is due here.
func (w *worker) portExit(ctx actor.Context, st proc.ExitStatus) {
	killedBy := proc.KilledBy(st, proc.Limits{MemoryMB: w.opts.Limits.MemoryMB, FsizeMB: w.opts.Limits.FsizeMB}, "", 0)
	ev := w.log.Warn().Int("exit_code", st.Code).Str("killed_by", killedBy).Str("phase", string(w.phase.name))
	if w.phase == phaseStarting {
		// Nothing ran: waiting callers may safely run elsewhere.
		ev.Str("stderr", w.k.stderr.String()).Msg("kernel exited before it was ready")
		w.failQueued(ReasonStartupFailed)
		w.decide(telemetry.CrashStartupFailure)
		w.finish(ctx)
		return
	}
	ev.Msg("kernel exited")
	c := w.active
	if w.phase == phaseRunning && c != nil {
		// The runner is gone: what it never drained is the cell's last
		// output, in the order it was written after what came in frames.
		c.stream(w.k.leftover())
	}
	w.replyActive(CellResult{Reason: ReasonPortExit, KilledBy: killedBy, Exit: &st}, telemetry.OutcomePortExit)
	if w.phase == phaseRunning {
		w.emitCancel(c, telemetry.CauseShutdown)
	}
	w.failQueued(ReasonPortExit)
	w.decide(telemetry.CrashPortExit)
	w.finish(ctx)
}

// exitedWhileEnding: the exit a stop or teardown was waiting for.
func (w *worker) exitedWhileEnding(ctx actor.Context, _ proc.ExitStatus) { w.finish(ctx) }

// fault is a protocol violation: the kernel cannot be
// trusted with another byte.
func (w *worker) fault(ctx actor.Context, err error) {
	w.log.Warn().Err(err).Str("phase", string(w.phase.name)).Msg("kernel protocol fault")
	if w.phase == phaseStarting {
		w.failQueued(ReasonStartupFailed)
		w.hardTeardown(ctx, telemetry.CrashStartupFailure)
		return
	}
	c := w.active
	wasRunning := w.phase == phaseRunning
	w.replyActive(CellResult{Reason: ReasonProtocolFault, KilledBy: KilledByProtocolFault}, telemetry.OutcomeProtocolFault)
	if wasRunning {
		w.emitCancel(c, telemetry.CauseShutdown)
	}
	w.failQueued(ReasonProtocolFault)
	w.hardTeardown(ctx, telemetry.CrashProtocolFault)
}

// decide records why the kernel ends; the first decision stands.
func (w *worker) decide(crash telemetry.SessionCrashReason) {
	if !w.ending {
		w.ending, w.crash = true, crash
	}
}

// hardTeardown terminates the process group: SIGTERM, a grace, SIGKILL, a
// grace (docs/architecture.md, Cancellation). The group is signalled while
// the interpreter is unreaped, so its id cannot have been reused.
func (w *worker) hardTeardown(ctx actor.Context, crash telemetry.SessionCrashReason) {
	w.decide(crash)
	w.disarmAll()
	w.enter(phaseTerminate)
	if w.exited {
		w.finish(ctx)
		return
	}
	w.k.proc.Signal(syscall.SIGTERM)
	w.arm(timerTerm, w.opts.TermGrace)
}

// finish releases the kernel once its process is gone and stops the
// actor. Every caller has its result by then.
func (w *worker) finish(ctx actor.Context) {
	if w.finished {
		return
	}
	w.finished = true
	w.disarmAll()
	w.replyActive(CellResult{Reason: ReasonInterrupted, KilledBy: KilledByShutdown}, telemetry.OutcomeInterrupted)
	w.failQueued(w.refusal())
	lifetime := time.Since(w.k.booted)
	w.k.release(&w.log)
	w.sendHeld(w.active)
	w.k = nil
	w.active = nil
	w.enter(phaseGone)
	if w.opts.OnExit != nil {
		w.opts.OnExit(Exit{Crash: w.crash, Lifetime: lifetime})
	}
	// Poison, not Stop: Executes already in the mailbox still get their
	// shutting_down.
	ctx.Poison(ctx.Self())
}

// abandon ends the kernel at once, blocking the actor for at most the
// graces: the actor is being stopped from outside (or its code failed),
// so there is no later message to wait for.
func (w *worker) abandon(ctx actor.Context, crash telemetry.SessionCrashReason) {
	if w.finished || w.k == nil {
		return
	}
	w.decide(crash)
	w.disarmAll()
	c := w.active
	if c != nil && (w.phase == phaseRunning || w.phase == phaseCancelling) {
		w.emitCancel(c, telemetry.CauseShutdown)
	}
	w.replyActive(CellResult{Reason: ReasonInterrupted, KilledBy: KilledByShutdown}, telemetry.OutcomeInterrupted)
	w.failQueued(ReasonShuttingDown)

	k := w.k
	k.frames.close() // nobody reads frames now; the pipe must still drain
	if k.proc.Alive() {
		if w.phase == phaseIdle {
			// An idle runner exits on EOF of its requests.
			k.stdin.close()
			doneWithin(k.proc, w.opts.ByeTimeout)
		}
		for _, step := range []struct {
			sig   syscall.Signal
			grace time.Duration
		}{{syscall.SIGTERM, w.opts.TermGrace}, {syscall.SIGKILL, w.opts.KillGrace}} {
			if !k.proc.Signal(step.sig) || doneWithin(k.proc, step.grace) {
				break
			}
		}
	}
	w.finished = true
	lifetime := time.Since(k.booted)
	k.release(&w.log)
	w.sendHeld(w.active)
	w.k = nil
	w.active = nil
	w.enter(phaseGone)
	if w.opts.OnExit != nil {
		w.opts.OnExit(Exit{Crash: w.crash, Lifetime: lifetime})
	}
	if _, stopping := ctx.Message().(*actor.Stopping); !stopping {
		ctx.Stop(ctx.Self())
	}
}

// doneWithin waits at most d for p to be done and reports whether it is.
func doneWithin(p *proc.Process, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Done():
		return true
	case <-t.C:
		return false
	}
}
