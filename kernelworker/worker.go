package kernelworker

import (
	"context"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker/internal/frame"
	"github.com/executecode/executecode/telemetry"
)

// worker is the actor of one kernel (docs/architecture.md, The kernel
// worker): it owns the interpreter process, the frame parser, the FIFO of
// waiting cells, the active cell with its capture and timer, and every step
// of cancelling and tearing the kernel down. Only its Receive touches this
// state; the port goroutines and timers just send it messages.
type worker struct {
	opts Options
	log  zerolog.Logger
	k    *kernel // nil once released
	// view is the status the worker publishes for readers that do not
	// send it a message (StatusView).
	view *StatusView

	behavior actor.Behavior
	phase    *phase

	system *actor.ActorSystem
	self   *actor.PID

	parser    frame.Parser
	queue     []*cell
	active    *cell
	cellSeq   int
	ticketSeq uint64
	completed int
	// cpuLimited is set once a soft RLIMIT_CPU below the hard limit may
	// be in force, so cells without a budget must lift it.
	cpuLimited bool

	timers [numTimers]*time.Timer
	tokens [numTimers]uint64

	exited   bool // the interpreter was reaped and its pipes drained
	crash    telemetry.SessionCrashReason
	ending   bool // crash is decided
	finished bool
}

func newWorker(opts Options, k *kernel) *worker {
	log := zerolog.Nop()
	if opts.Logger != nil {
		log = *opts.Logger
	}
	w := &worker{
		opts:       opts,
		log:        log.With().Str("component", "kernelworker").Uint64("generation", opts.Generation).Logger(),
		k:          k,
		behavior:   actor.NewBehavior(),
		cpuLimited: opts.Limits.CPUSeconds > 0,
		view:       &StatusView{},
	}
	if k != nil {
		w.view.proc = k.proc
	}
	w.enter(phaseStarting)
	w.view.publish(w.statusValue())
	return w
}

// Receive runs the current phase's behaviour. A panic in the worker's own
// code must not leave callers without their result or a kernel without
// an owner: it ends the kernel like an external stop.
func (w *worker) Receive(ctx actor.Context) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error().Interface("panic", r).Msg("kernel worker failed; discarding its kernel")
			w.abandon(ctx, telemetry.CrashUnknown)
		}
		w.view.publish(w.statusValue())
	}()
	w.behavior.Receive(ctx)
}

// common handles what every phase handles alike.
func (w *worker) common(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.system, w.self = ctx.ActorSystem(), ctx.Self()
		if w.k == nil {
			// A restart after the kernel was released: nothing to own.
			ctx.Stop(ctx.Self())
			return
		}
		if w.phase == phaseStarting {
			w.arm(timerStartup, w.opts.StartupTimeout)
		}
	case *actor.Stopping, *actor.Restarting:
		// Stopped from outside (supervisor, system): no time for the
		// graceful path, but every caller still gets its result.
		w.abandon(ctx, "")
	case *Execute:
		w.onExecute(ctx, m)
	case *StatusRequest:
		ctx.Respond(w.status())
	case *Stop:
		w.onStop(ctx, m.Reason)
	case *callerGone:
		w.onCallerGone(ctx, m.ticket)
	case *queueExpired:
		w.onQueueExpired(m.ticket)
	case *frameChunk:
		w.onChunk(ctx, m)
	case *processExited:
		w.exited = true
		w.phase.exit(w, ctx, m.status)
	}
	// Anything else, stale timers included, is ignored.
}

// enter switches to phase p: its behaviour and its frame rules.
func (w *worker) enter(p *phase) {
	w.phase = p
	w.behavior.Become(func(ctx actor.Context) {
		if p.receive == nil || !p.receive(w, ctx) {
			w.common(ctx)
		}
	})
}

func (w *worker) status() *Status {
	st := w.statusValue()
	return &st
}

func (w *worker) statusValue() Status {
	st := Status{
		Phase:          w.phase.name,
		Generation:     w.opts.Generation,
		Key:            w.opts.Key,
		QueueDepth:     len(w.queue),
		CellsCompleted: w.completed,
		ProcessAlive:   w.k != nil && w.k.proc.Alive(),
	}
	if w.active != nil {
		st.ActiveRequestID = w.active.id
	}
	return st
}

// onExecute refuses a full queue, a stopping worker and a caller already
// gone, and otherwise dispatches the cell at once or queues it until its
// deadline (docs/architecture.md, Execute and dispatch).
func (w *worker) onExecute(ctx actor.Context, e *Execute) {
	if e.Reply == nil {
		w.log.Warn().Msg("execute without a reply channel dropped")
		return
	}
	c := &cell{req: e}
	if !validRequest(e) {
		w.reply(c, CellResult{Reason: ReasonInvalidRequest, StateRetained: true})
		return
	}
	if !w.phase.accepts {
		w.reply(c, CellResult{Reason: w.refusal()})
		return
	}
	if len(w.queue) >= w.opts.MaxQueuedCells {
		w.reply(c, CellResult{Reason: ReasonQueueFull, StateRetained: true})
		return
	}
	if e.Ctx != nil && e.Ctx.Err() != nil {
		// Gone before it arrived: never run code nobody waits for.
		w.reply(c, CellResult{Reason: ReasonInterrupted, StateRetained: true, KilledBy: proc.KilledByCancelled})
		return
	}
	w.ticketSeq++
	c.ticket = w.ticketSeq
	if e.Ctx != nil {
		system, self, msg := w.system, w.self, &callerGone{ticket: c.ticket}
		c.unwatch = context.AfterFunc(e.Ctx, func() { system.Root.Send(self, msg) })
	}
	if w.phase == phaseIdle {
		w.dispatch(c)
		return
	}
	if !e.Deadline.IsZero() {
		system, self, msg := w.system, w.self, &queueExpired{ticket: c.ticket}
		c.expiry = time.AfterFunc(time.Until(e.Deadline), func() { system.Root.Send(self, msg) })
	}
	w.queue = append(w.queue, c)
}

// onQueueExpired answers a cell whose deadline passed before it left the
// queue: it timed out without running, and the kernel is untouched.
func (w *worker) onQueueExpired(ticket uint64) {
	for i, c := range w.queue {
		if c.ticket == ticket {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			w.reply(c, CellResult{Reason: ReasonTimeout, StateRetained: true, KilledBy: proc.KilledByTimeout})
			return
		}
	}
}

func validRequest(e *Execute) bool {
	switch {
	case e.Code == "", e.Timeout <= 0, e.CPUBudget < 0:
		return false
	case e.Bridge != nil && (e.Bridge.Dir == "" || e.Bridge.Token == ""):
		return false
	}
	return true
}

// dispatch starts a cell: the timer is armed and the CPU budget applied
// before the eval is written, and the eval is written exactly once. What
// only the host needs (the capture, the cell.start event) is made after
// the write, while the runner reads the request: no frame of the cell is
// handled before dispatch returns.
func (w *worker) dispatch(c *cell) {
	w.cellSeq++
	c.id = "cell-" + strconv.Itoa(w.cellSeq)
	c.dispatched = time.Now()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	w.active = c
	timeout := c.req.Timeout
	if d := c.req.Deadline; !d.IsZero() {
		timeout = max(min(timeout, time.Until(d)), time.Millisecond)
	}
	w.arm(timerCell, timeout)
	w.applyCPUBudget(c)

	cwd := c.req.Cwd
	if cwd == "" {
		cwd = w.opts.Cwd
	}
	req := evalRequest{V: 1, Type: "eval", ID: c.id, Code: c.req.Code, Cwd: cwd}
	if b := c.req.Bridge; b != nil {
		req.Bridge = &evalBridge{Dir: b.Dir, Token: b.Token, MaxTextBytes: b.MaxTextBytes}
	}
	if line, err := requestLine(req); err == nil {
		// A lost write is bounded by the cell timer and the port exit.
		w.k.stdin.send(line)
	}
	c.capture = proc.NewCapture(w.opts.MaxOutputBytes, w.opts.Spill, proc.ScrubWith(c.req.Scrub), proc.SpillLimit(w.opts.MaxSpillBytes))
	w.emit(telemetry.CellStart{QueueDepth: len(w.queue), QueueCapacity: w.opts.MaxQueuedCells})
	w.enter(phaseRunning)
}

func (w *worker) dispatchNext() {
	if len(w.queue) == 0 {
		return
	}
	c := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	w.dispatch(c)
}

func (w *worker) applyCPUBudget(c *cell) {
	budget := c.req.CPUBudget
	if budget == 0 {
		budget = time.Duration(w.opts.Limits.CPUSeconds) * time.Second
	}
	if budget == 0 && !w.cpuLimited {
		return
	}
	if err := proc.SetCPUBudget(w.k.proc.Pid(), budget); err != nil {
		w.log.Debug().Err(err).Msg("cpu budget not applied")
		return
	}
	w.cpuLimited = budget > 0
}

// complete ends the active cell on its done frame.
func (w *worker) complete(ctx actor.Context, f frame.Frame) {
	c := w.active
	w.disarm(timerCell)
	w.completed++
	now := time.Now()
	res := CellResult{
		StateRetained:     true,
		Duration:          c.elapsed(now),
		CellsCompleted:    w.completed,
		Output:            c.finishOutput(w.opts.ReleaseSpill),
		DroppedLateOutput: f.Dropped,
	}
	outcome := telemetry.OutcomeOK
	if c.exception != nil {
		res.Reason, res.Exception = ReasonException, c.exception
		res.KilledBy = cellKilledBy(c.exception, w.opts.Limits)
		outcome = telemetry.OutcomeException
	}
	w.emit(telemetry.CellStop{Duration: res.Duration, Outcome: outcome, DroppedLateOutput: f.Dropped})
	w.reply(c, res)
	w.active = nil
	w.enter(phaseIdle)
	w.dispatchNext()
}

// onCallerGone: a queued caller leaves the queue; the active, unanswered
// caller's cell is cancelled and its kernel discarded.
func (w *worker) onCallerGone(ctx actor.Context, ticket uint64) {
	for i, c := range w.queue {
		if c.ticket == ticket {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			w.reply(c, CellResult{Reason: ReasonInterrupted, StateRetained: true, KilledBy: proc.KilledByCancelled})
			return
		}
	}
	c := w.active
	if c == nil || c.ticket != ticket || c.replied || w.phase != phaseRunning {
		return // e.g. a timed-out caller leaving after its reply: no second interrupt
	}
	w.holdActive(CellResult{Reason: ReasonInterrupted, KilledBy: proc.KilledByCancelled}, telemetry.OutcomeInterrupted)
	w.beginCancel(ctx, telemetry.CauseCallerExit)
}

// onCellTimeout is the cell timer: the partial output is taken
// and the kernel discarded. Its duration counts from the dispatch, where
// the timer started, so a timed-out cell never reports less than its
// timeout.
func (w *worker) onCellTimeout(ctx actor.Context) {
	w.holdActive(CellResult{Reason: ReasonTimeout, KilledBy: proc.KilledByTimeout, Duration: time.Since(w.active.dispatched)},
		telemetry.OutcomeTimeout)
	w.beginCancel(ctx, telemetry.CauseTimeout)
}

// holdActive ends the active cell with a result that loses the kernel:
// its partial output is taken and its cell.stop emitted now, but, unlike
// the reference, the answer waits for sendHeld, once the kernel is gone,
// so that no process of its session outlives the result. A zero Duration
// is the cell's elapsed time.
func (w *worker) holdActive(res CellResult, outcome telemetry.CellOutcome) {
	c := w.active
	if c == nil || c.replied || c.held != nil {
		return
	}
	res.StateRetained = false
	if res.Duration == 0 {
		res.Duration = c.elapsed(time.Now())
	}
	res.Output = c.finishOutput(w.opts.ReleaseSpill)
	w.emit(telemetry.CellStop{Duration: res.Duration, Outcome: outcome})
	c.held = &res
}

// replyActive answers the active cell with a result that loses the
// kernel, with its partial output, and emits its cell.stop.
func (w *worker) replyActive(res CellResult, outcome telemetry.CellOutcome) {
	c := w.active
	if c == nil || c.replied {
		return
	}
	if c.held != nil {
		return // answered by sendHeld once the kernel is gone
	}
	res.StateRetained = false
	res.Duration = c.elapsed(time.Now())
	res.Output = c.finishOutput(w.opts.ReleaseSpill)
	w.emit(telemetry.CellStop{Duration: res.Duration, Outcome: outcome})
	w.reply(c, res)
}

// sendHeld answers a timed-out cell whose kernel, whatever ended it, is
// gone.
func (w *worker) sendHeld(c *cell) {
	if c != nil && c.held != nil {
		w.reply(c, *c.held)
	}
}

// failQueued answers every waiting cell with reason; none of them ran.
func (w *worker) failQueued(reason string) {
	for _, c := range w.queue {
		w.reply(c, CellResult{Reason: reason})
	}
	w.queue = nil
}

// reply sends c its one CellResult; later calls do nothing.
func (w *worker) reply(c *cell, res CellResult) {
	if c.replied {
		return
	}
	c.replied = true
	if c.unwatch != nil {
		c.unwatch()
	}
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.finishOutput(w.opts.ReleaseSpill) // ends the spill registration of an unread capture
	res.RequestID = c.id
	if res.CellsCompleted == 0 {
		res.CellsCompleted = w.completed
	}
	if !res.StateRetained {
		// The kernel is ending with this answer: its view says so before
		// the caller can act on it, or the caller's next cell could be
		// handed this kernel on the status of a moment ago.
		st := w.statusValue()
		st.Phase = PhaseStopping
		w.view.publish(st)
	}
	select {
	case c.req.Reply <- res:
	default:
		w.log.Error().Msg("cell result dropped: the reply channel has no free buffer")
	}
}

// refusal is the reason a cell sent to an ending worker is refused with:
// a kernel that never became ready is a failed start, which a caller
// treats as nothing having run (and may run the call isolated), whether
// its cell arrived before the failure or just after it.
func (w *worker) refusal() string {
	if w.ending && w.crash == telemetry.CrashStartupFailure {
		return ReasonStartupFailed
	}
	return ReasonShuttingDown
}

func (w *worker) emitCancel(c *cell, cause telemetry.CancelCause) {
	if c == nil || c.cancelEmitted {
		return
	}
	c.cancelEmitted = true
	w.emit(telemetry.CellCancel{Duration: c.elapsed(time.Now()), Cause: cause})
}

func (w *worker) emit(e telemetry.Event) { w.opts.Telemetry.Emit(e) }

// onChunk parses bytes of the control pipe and hands each frame to the
// phase; processing stops once the worker has begun to end.
func (w *worker) onChunk(ctx actor.Context, m *frameChunk) {
	defer m.release()
	if w.k == nil || w.phase.ignoresFrames {
		return
	}
	frames, err := w.parser.Feed(m.data)
	if err != nil {
		w.fault(ctx, err)
		return
	}
	for _, f := range frames {
		w.phase.frame(w, ctx, f)
		if w.phase.ignoresFrames {
			return
		}
	}
}
