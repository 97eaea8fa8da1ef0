package kernelworker

import (
	"fmt"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker/internal/frame"
)

// A phase is one behaviour of the worker (docs/architecture.md, Phases):
// which messages it handles itself (its timers), which frames fit it, and
// what the interpreter's exit means in it. Everything else goes to
// worker.common.
type phase struct {
	// name is what Status reports.
	name Phase
	// accepts: a new Execute is dispatched or queued, not refused with
	// shutting_down.
	accepts bool
	// ignoresFrames: the kernel is being torn down; frames no longer
	// matter.
	ignoresFrames bool
	receive       func(w *worker, ctx actor.Context) bool
	frame         func(w *worker, ctx actor.Context, f frame.Frame)
	exit          func(w *worker, ctx actor.Context, st proc.ExitStatus)
}

// The phases. The last five all report "stopping": the kernel is gone
// for its callers, only how it is taken down differs.
var (
	phaseStarting   *phase // booted, waiting for ready
	phaseIdle       *phase
	phaseRunning    *phase
	phaseCancelling *phase // SIGINT sent after a timeout or caller death, waiting for done
	phaseClosing    *phase // done after cancelling: shutdown written, waiting for bye
	phaseHalting    *phase // Stop while a cell ran: SIGINT sent, waiting for done
	phaseHaltBye    *phase // Stop: shutdown written, waiting for bye
	phaseTerminate  *phase // SIGTERM, then SIGKILL, to the group; waiting for the exit
	phaseGone       *phase // released; the actor is stopping
)

func init() {
	phaseStarting = &phase{name: PhaseStarting, accepts: true,
		receive: onTimer(timerStartup, (*worker).onStartupTimeout),
		frame:   (*worker).startingFrame, exit: (*worker).portExit}
	phaseIdle = &phase{name: PhaseIdle, accepts: true,
		frame: (*worker).unexpectedFrame, exit: (*worker).portExit}
	phaseRunning = &phase{name: PhaseRunning, accepts: true,
		receive: onTimer(timerCell, (*worker).onCellTimeout),
		frame:   (*worker).runningFrame, exit: (*worker).portExit}
	phaseCancelling = &phase{name: PhaseCancelling,
		receive: onTimer(timerGrace, func(w *worker, ctx actor.Context) {
			w.log.Info().Msg("interrupt grace expired; terminating the kernel")
			w.hardTeardown(ctx, crashEscalation)
		}),
		frame: (*worker).cancellingFrame, exit: (*worker).portExit}
	phaseClosing = &phase{name: PhaseStopping,
		receive: onTimer(timerBye, func(w *worker, ctx actor.Context) { w.hardTeardown(ctx, crashEscalation) }),
		frame:   (*worker).closingFrame, exit: (*worker).portExit}
	phaseHalting = &phase{name: PhaseStopping,
		receive: onTimer(timerHalt, (*worker).haltShutdown),
		frame:   (*worker).haltingFrame, exit: (*worker).exitedWhileEnding}
	phaseHaltBye = &phase{name: PhaseStopping,
		receive: onTimer(timerHalt, func(w *worker, ctx actor.Context) { w.hardTeardown(ctx, "") }),
		frame:   (*worker).haltByeFrame, exit: (*worker).exitedWhileEnding}
	phaseTerminate = &phase{name: PhaseStopping, ignoresFrames: true,
		receive: (*worker).terminateTimers,
		frame:   func(*worker, actor.Context, frame.Frame) {}, exit: (*worker).exitedWhileEnding}
	phaseGone = &phase{name: PhaseStopping, ignoresFrames: true,
		frame: func(*worker, actor.Context, frame.Frame) {}, exit: func(*worker, actor.Context, proc.ExitStatus) {}}
}

// Timers of the worker. Each kind has at most one armed timer; the token
// in its message tells a current timer from a stale one.
type timerKind int

const (
	timerStartup timerKind = iota // 10 s to ready
	timerCell                     // the active cell's timeout
	timerGrace                    // SIGINT grace while cancelling
	timerBye                      // bye wait after the cancelled cell's done
	timerHalt                     // the steps of an external Stop
	timerTerm                     // SIGTERM grace
	timerKill                     // SIGKILL grace
	numTimers
)

// onTimer makes a phase receive that handles its current timer of kind.
func onTimer(kind timerKind, f func(*worker, actor.Context)) func(*worker, actor.Context) bool {
	return func(w *worker, ctx actor.Context) bool {
		m, ok := ctx.Message().(*timerFired)
		if !ok || m.kind != kind {
			return false
		}
		if w.fired(m) {
			f(w, ctx)
		}
		return true
	}
}

func (w *worker) arm(kind timerKind, d time.Duration) {
	w.disarm(kind)
	msg := &timerFired{kind: kind, token: w.tokens[kind]}
	system, self := w.system, w.self
	w.timers[kind] = time.AfterFunc(d, func() { system.Root.Send(self, msg) })
}

func (w *worker) disarm(kind timerKind) {
	if t := w.timers[kind]; t != nil {
		t.Stop()
		w.timers[kind] = nil
	}
	w.tokens[kind]++
}

func (w *worker) disarmAll() {
	for k := range numTimers {
		w.disarm(k)
	}
}

// fired reports whether m is the current timer of its kind, and consumes
// it.
func (w *worker) fired(m *timerFired) bool {
	if w.timers[m.kind] == nil || m.token != w.tokens[m.kind] {
		return false
	}
	w.timers[m.kind] = nil
	w.tokens[m.kind]++
	return true
}

// Frame rules (docs/protocol.md, Frames), one function per phase.

func (w *worker) startingFrame(ctx actor.Context, f frame.Frame) {
	if f.Type != frame.Ready {
		w.unexpectedFrame(ctx, f)
		return
	}
	w.disarm(timerStartup)
	w.enter(phaseIdle)
	w.dispatchNext()
}

func (w *worker) runningFrame(ctx actor.Context, f frame.Frame) {
	c := w.active
	switch {
	case f.Type == frame.Started && f.ID == c.id && c.started.IsZero():
		c.started = time.Now()
	case f.Type == frame.Stream && f.ID == c.id:
		c.stream(f.Data)
	case f.Type == frame.Exception && f.ID == c.id:
		c.exception = c.cleanException(f)
	case f.Type == frame.Done && f.ID == c.id:
		w.complete(ctx, f)
	default:
		w.unexpectedFrame(ctx, f)
	}
}

func (w *worker) cancellingFrame(ctx actor.Context, f frame.Frame) {
	c := w.active
	switch {
	case f.Type == frame.Started && f.ID == c.id && c.started.IsZero():
		// The cell's code may already run, and be cancelled, while its
		// started frame is still on its way to this mailbox.
		c.started = time.Now()
	case f.Type == frame.Stream && f.ID == c.id:
		// The capture was finished with the reply.
	case f.Type == frame.Exception && f.ID == c.id:
		c.exception = c.cleanException(f)
	case f.Type == frame.Done && f.ID == c.id:
		w.disarm(timerGrace)
		w.enter(phaseClosing)
		w.requestShutdown()
		w.arm(timerBye, w.opts.ByeTimeout)
	default:
		w.unexpectedFrame(ctx, f)
	}
}

func (w *worker) closingFrame(ctx actor.Context, f frame.Frame) {
	if f.Type != frame.Bye {
		w.unexpectedFrame(ctx, f)
		return
	}
	w.hardTeardown(ctx, "")
}

// haltingFrame: during an external Stop only the end of the interrupted
// cell and the end of the runner matter.
func (w *worker) haltingFrame(ctx actor.Context, f frame.Frame) {
	switch f.Type {
	case frame.Done:
		w.haltShutdown(ctx)
	case frame.Bye, frame.Fatal:
		w.hardTeardown(ctx, "")
	}
}

func (w *worker) haltByeFrame(ctx actor.Context, f frame.Frame) {
	switch f.Type {
	case frame.Bye, frame.Fatal:
		w.hardTeardown(ctx, "")
	}
}

// unexpectedFrame: a parser-valid frame that does not fit the phase, or
// a fatal frame, is a protocol fault.
func (w *worker) unexpectedFrame(ctx actor.Context, f frame.Frame) {
	if f.Type == frame.Fatal {
		w.fault(ctx, &frame.ProtocolError{Check: frame.CheckFatal, Detail: frame.Sample(f.Reason)})
		return
	}
	detail := f.Type
	if f.ID != "" {
		detail += " " + frame.Sample(f.ID)
	}
	w.fault(ctx, &frame.ProtocolError{Check: frame.CheckUnexpectedFrame, Detail: fmt.Sprintf("%s in phase %s", detail, w.phase.name)})
}

// terminateTimers escalates SIGTERM to SIGKILL, and gives up on a kernel
// that survives even that (a process stuck in the kernel): its pipes and
// workspace are released anyway.
func (w *worker) terminateTimers(ctx actor.Context) bool {
	m, ok := ctx.Message().(*timerFired)
	if !ok {
		return false
	}
	switch {
	case m.kind == timerTerm && w.fired(m):
		w.k.proc.Signal(syscall.SIGKILL)
		w.arm(timerKill, w.opts.KillGrace)
	case m.kind == timerKill && w.fired(m):
		w.log.Error().Msg("kernel survived SIGKILL for the kill grace; releasing it anyway")
		w.finish(ctx)
	}
	return true
}
