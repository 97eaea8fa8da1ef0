package pump

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/executecode/executecode/internal/bell"
)

// errStopped is what DrainAndStats returns once the server is gone; the
// caller must treat the cell's accounting as lost (docs/architecture.md,
// Rules: lost accounting is never trusted).
var errStopped = errors.New("pump server stopped")

// abortWait is how long Abort lets an in-flight sweep finish on its own
// before cancelling it.
const abortWait = 25 * time.Millisecond

// Server is the one driver of a bridge's sweeps, for a session cell
// (StartServer) and for a per-call run (StartRun): it sweeps the bridge
// directory on doorbell wake-ups and a fallback timer, one sweep at a
// time, and keeps the claim ledger in its own memory, where the script
// cannot reach it. A sweep that dies (panics, exits, or is cancelled with
// claims in flight) is settled conservatively: the stats from before it,
// the accounting-loss flag, and recovery of every claim it made from its
// markers and the ledger. A run keeps instead what a sweep its own end
// cancelled counted (settle.go).
//
// One goroutine (the loop) owns the stats and the in-flight sweep; each
// sweep runs on its own goroutine, on a copy of the stats, under a context
// derived from the cell signal. The ledger is the only state a sweep
// writes that the loop reads: it is appended under ledgerMu,
// synchronously, before the spend it records, so it stays readable after a
// sweep is abandoned.
type Server struct {
	cfg       Config
	bridge    bridge
	hooks     hooks
	cell      context.Context
	abortCell context.CancelFunc
	bell      *bell.Subscription
	tasks     *taskGroup

	// A run's server (StartRun) also watches its interpreter's exit and
	// its context's end; a session cell's has neither.
	run    bool
	exited <-chan struct{}
	ended  <-chan struct{}
	// final is the run's stats, written by the loop before done closes.
	final Stats

	abortCh   chan struct{} // closed by Abort
	abortOnce sync.Once
	abortDone chan struct{} // closed by the loop once the abort is settled
	stopCh    chan struct{} // closed by Stop
	stopOnce  sync.Once
	drains    chan chan Stats
	finishes  chan chan Stats
	results   chan sweepResult
	done      chan struct{} // closed when the loop has ended

	ledgerMu sync.Mutex
	ledger   claimLedger

	// Owned by the loop goroutine.
	stats  Stats
	gen    uint64
	flight *flight
}

// claimedLive looks id up in the ledger not yet taken by a settlement:
// the claims of a sweep still in flight or abandoned since. The ledger
// hears of a claim before its marker is published, so a marker this
// server made is always found here or in the settled stats.
func (s *Server) claimedLive(id int64) (string, bool) {
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	e, ok := s.ledger[id]
	return e.Tool, ok && e.Kind == claimClaimed
}

// flight is the sweep in progress.
type flight struct {
	gen      uint64
	cancel   context.CancelFunc
	fromWake bool
	// named says the sweep opened only the requests the bell named
	// instead of listing the directory.
	named bool
}

// sweepResult is what a sweep goroutine reports, exactly once.
type sweepResult struct {
	gen        uint64
	stats      Stats
	err        error
	progress   int
	abandoned  int
	unanswered int
	// fault is set when the sweep body panicked (the panic value's type,
	// never its payload) or its goroutine exited.
	fault string
}

// StartServer validates cfg (a refusal names the key it refused) and
// starts a session cell's server. It subscribes to cfg.Bells, so every
// request-bell ring sweeps, and sweeps on the fallback timer otherwise.
// The claim ledger is always the server's own.
func StartServer(cfg Config) (*Server, error) {
	return startServer(cfg, hooks{})
}

func startServer(cfg Config, h hooks) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := newServer(context.Background(), cfg, h)
	s.start()
	return s, nil
}

// Run is the server of one per-call run. It has no Abort, DrainAndStats
// or Stop: a run ends with its interpreter, and Wait is its one read.
type Run struct{ srv *Server }

// StartRun starts the server of a per-call run on the same loop as a
// session cell's (docs/protocol.md, "Claim markers, the ledger, and
// recovery"). Its sweeps and their dispatches run under ctx, so the run's
// timeout or cancel ends every helper call in flight; after that no sweep
// starts. exited closes when the run's interpreter has exited: from then
// on no sweep starts either, since a request still on disk belongs to
// nobody who waits. A run's config is taken as it is, not validated: its
// zero budgets refuse every call, as Config says.
func StartRun(ctx context.Context, cfg Config, exited <-chan struct{}) *Run {
	return startRun(ctx, cfg, exited, hooks{})
}

func startRun(ctx context.Context, cfg Config, exited <-chan struct{}, h hooks) *Run {
	s := newServer(ctx, cfg, h)
	s.run, s.exited, s.ended = true, exited, ctx.Done()
	s.start()
	return &Run{srv: s}
}

// Wait returns the run's stats once its interpreter has exited and the
// server has settled the sweep that was in flight then (its helper calls
// run to their end, or to the end of the run's context) and drained,
// once, the notifications present. A sweep that ignores the end of the
// run's context is abandoned after a grace, so Wait returns at the latest
// shortly after both the exit and the end of that context.
func (r *Run) Wait() Stats {
	<-r.srv.done
	return r.srv.final
}

// newServer makes a server whose cell signal is derived from parent.
func newServer(parent context.Context, cfg Config, h hooks) *Server {
	s := &Server{
		tasks:     newTaskGroup(),
		abortCh:   make(chan struct{}),
		abortDone: make(chan struct{}),
		stopCh:    make(chan struct{}),
		drains:    make(chan chan Stats),
		finishes:  make(chan chan Stats),
		results:   make(chan sweepResult),
		done:      make(chan struct{}),
		ledger:    claimLedger{},
		stats:     newStats(),
		hooks:     h.settled(),
	}
	observer := cfg.onClaim
	cfg.onClaim = func(id int64, kind claimKind, tool string) {
		s.ledgerMu.Lock()
		s.ledger.Record(id, kind, tool)
		s.ledgerMu.Unlock()
		if observer != nil {
			observer(id, kind, tool)
		}
	}
	s.bridge = bridge{
		notified: &notifyMemory{},
		tasks:    s.tasks,
		claimed:  s.claimedLive,
		unlink:   h.unlink,
	}.settled()
	s.cfg = cfg.settled()
	s.cell, s.abortCell = context.WithCancel(parent)
	return s
}

// start subscribes to the bells and starts the loop.
func (s *Server) start() {
	s.bell = s.cfg.Bells.Listen()
	s.tasks.add()
	go s.loop()
}

// sweeper is a pass of this server's bridge over stats.
func (s *Server) sweeper(stats *Stats) *sweeper {
	return newSweeper(s.cfg, s.bridge, stats)
}

// Abort stops the cell's bridge work: it cancels the cell signal (every
// dispatch sees its context end), lets an in-flight sweep finish for up to
// 25 ms, then cancels it and settles it as failed unless it returned exact
// stats. No sweep starts afterwards; the server stays up for DrainAndStats
// and Stop. Abort returns when the abort is settled, the server is gone, or
// ctx ends (the abort still completes).
func (s *Server) Abort(ctx context.Context) {
	s.abortCell()
	s.abortOnce.Do(func() { close(s.abortCh) })
	select {
	case <-s.abortDone:
	case <-s.done:
	case <-ctx.Done():
	}
}

// DrainAndStats forwards the notifications present now and returns the
// cell's stats, including them. If a sweep is in flight it waits for that
// sweep to settle first. An error (server gone, ctx ended) means the
// stats are lost: the returned Stats then carry AccountingLoss, and the
// caller must not trust the run (docs/architecture.md, Rules: lost
// accounting is never trusted).
func (s *Server) DrainAndStats(ctx context.Context) (Stats, error) {
	return s.ask(ctx, s.drains)
}

// ask sends the loop a reply channel on ch and waits for the stats.
func (s *Server) ask(ctx context.Context, ch chan chan Stats) (Stats, error) {
	lost := newStats()
	lost.AccountingLoss = true
	reply := make(chan Stats, 1)
	select {
	case ch <- reply:
	case <-s.done:
		return lost, errStopped
	case <-ctx.Done():
		return lost, fmt.Errorf("pump server stats: %w", ctx.Err())
	}
	select {
	case st := <-reply:
		return st, nil
	case <-ctx.Done():
		select {
		case st := <-reply: // answered as ctx ended: the answer stands
			return st, nil
		default:
		}
		return lost, fmt.Errorf("pump server stats: %w", ctx.Err())
	}
}

// Finish is Abort and then DrainAndStats in one exchange with the loop:
// the cell's end on its critical path waits for the loop once, not twice.
// The notifications it forwards are the cell's last: a Stop after it
// drains none (it may run after the caller has its answer, off the cell's
// path, where a late notification would reach nobody who waits). Its
// error and lost stats are DrainAndStats'.
func (s *Server) Finish(ctx context.Context) (Stats, error) {
	s.abortCell()
	s.abortOnce.Do(func() { close(s.abortCh) })
	return s.ask(ctx, s.finishes)
}

// Stop ends the server: it aborts the cell, settles an in-flight sweep
// as Abort does, drains notifications once more and unlinks the first
// 10,000 entries of the bridge directory (never a directory, never
// recursively). It returns when every goroutine the server started has
// ended, or when ctx ends. It is idempotent, and no request is ever
// drained.
func (s *Server) Stop(ctx context.Context) {
	s.abortCell()
	s.stopOnce.Do(func() { close(s.stopCh) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return
	}
	select {
	case <-s.tasks.wait():
	case <-ctx.Done():
	}
}

// loop is the server: the only goroutine that touches stats and flight.
func (s *Server) loop() {
	defer s.tasks.done()
	defer close(s.done)
	defer s.bell.Cancel()

	l := &loopState{
		s:       s,
		poll:    time.NewTimer(s.cfg.PollInterval),
		pause:   time.NewTimer(time.Hour),
		gate:    wakeGate{max: s.cfg.PollInterval},
		abortCh: s.abortCh, exitedCh: s.exited, endedCh: s.ended,
	}
	l.pause.Stop()
	defer l.poll.Stop()
	defer l.pause.Stop()

	for {
		if !l.mayStart() && l.exited && s.flight == nil {
			// A run ends here, never with a sweep in flight: the calls it
			// claimed before the exit are still accounted.
			l.answer()
			s.finish()
			return
		}
		wakeC, pauseC, pollC := l.armed()
		select {
		case <-s.stopCh:
			s.cancelSweep()
			l.answer()
			if !l.finished {
				s.drain()
			}
			s.removeProtocolFiles()
			return

		case <-l.abortCh:
			l.abort()

		case reply := <-s.finishes:
			if l.abortCh != nil {
				l.abort() // Finish closed it; the loop hears it here first
			}
			l.waiting = append(l.waiting, reply)
			l.answer()
			l.finished = true

		case <-l.exitedCh:
			l.exited, l.exitedCh = true, nil // the loop's top finishes the run

		case <-l.endedCh:
			// The run's context ended, and with it the contexts of the
			// sweep in flight and its dispatches.
			l.endedCh, l.aborted = nil, true
			s.cancelSweep()
			l.answer()

		case reply := <-s.drains:
			l.waiting = append(l.waiting, reply)
			if s.flight == nil {
				l.answer()
			}

		case r := <-s.results:
			l.settled(r)

		case <-wakeC:
			switch {
			case s.flight != nil:
				l.wakePending = true
			case l.mayStart():
				s.startWakeSweep()
			}

		case <-pauseC:
			l.paused = false
			if l.wakePending && s.flight == nil && l.mayStart() {
				l.wakePending = false
				s.startWakeSweep()
			}

		case <-pollC:
			if l.mayStart() {
				s.startSweep(false, nil)
			}
		}
	}
}

// loopState is the loop's own bookkeeping besides the server's stats and
// flight: its timers, the flood backoff, and what stops it sweeping.
type loopState struct {
	s           *Server
	poll, pause *time.Timer
	gate        wakeGate
	paused      bool // wake-ups wait for the pause timer (flood backoff)
	wakePending bool // a wake-up arrived while a sweep was in flight
	aborted     bool // Abort, or the end of a run's context: no sweep starts
	exited      bool // a run's interpreter has exited: no sweep starts
	finished    bool // Finish was answered: Stop drains no more
	// Each is nil once heard (and always, for what a server does not
	// watch).
	abortCh, exitedCh, endedCh <-chan struct{}
	waiting                    []chan Stats // DrainAndStats callers waiting for a sweep
}

// abort settles Abort (or Finish): no sweep starts any more, the one in
// flight is settled, and whoever waits for stats is answered.
func (l *loopState) abort() {
	l.abortCh, l.aborted = nil, true
	l.s.cancelSweep()
	l.answer()
	close(l.s.abortDone)
}

// armed returns the channels the loop listens to for starting a sweep:
// none once sweeping is over, the pause timer instead of the bell during
// a backoff, and the fallback timer only between sweeps.
func (l *loopState) armed() (wake <-chan struct{}, pause, poll <-chan time.Time) {
	if l.aborted || l.exited {
		return nil, nil, nil
	}
	wake = l.s.bell.C
	if l.paused {
		wake, pause = nil, l.pause.C
	}
	if l.s.flight == nil {
		poll = l.poll.C
	}
	return wake, pause, poll
}

// mayStart says whether a sweep may start now. The exit wins every race:
// a request published as the script ended must not be swept, whichever
// of the exit and a wake-up the loop heard first.
func (l *loopState) mayStart() bool {
	if !l.exited {
		select {
		case <-l.exitedCh:
			l.exited, l.exitedCh = true, nil
		default:
		}
	}
	return !l.aborted && !l.exited
}

// answer hands every waiting DrainAndStats caller the stats, with the
// notifications present now.
func (l *loopState) answer() {
	for _, reply := range l.waiting {
		l.s.absorbLateFeeds()
		l.s.drain()
		reply <- l.s.stats.Clone()
	}
	l.waiting = nil
}

// settled takes a sweep's result: it settles the current sweep (a stale
// result is refused), answers the waiting callers, and then, while
// sweeping goes on, adjusts the backoff and runs the wake-up that
// arrived mid-sweep.
func (l *loopState) settled(r sweepResult) {
	s := l.s
	if s.flight == nil || r.gen != s.flight.gen {
		s.refuseStale(r)
		return
	}
	fromWake, named := s.flight.fromWake, s.flight.named
	s.settle(r)
	l.answer()
	if l.aborted || l.exited {
		return
	}
	if s.hooks.onSweep != nil {
		s.hooks.onSweep(r.progress)
	}
	if r.progress > 0 {
		l.pause.Stop()
		l.paused = false
	}
	if d := l.gate.after(fromWake, r.progress); d > 0 {
		l.pause.Reset(d)
		l.paused = true
	}
	if !named {
		// Only a listing restarts the fallback: a stream of named calls
		// must not keep a file planted without a ring (or named with a
		// ring dropped past MaxPending) from ever being listed.
		l.poll.Reset(s.cfg.PollInterval)
	}
	if l.wakePending && !l.paused && l.mayStart() {
		l.wakePending = false
		s.startWakeSweep()
	}
}

// finish is a run's last act: the notifications present now are drained,
// once, and the stats become the run's.
func (s *Server) finish() {
	s.absorbLateFeeds()
	s.drain()
	s.final = s.stats.Clone()
}

// startWakeSweep serves what the bell delivered: the requests it named,
// or a listing when a plain ring (or more names than a listener holds)
// asked for one. A wake-up whose names an earlier sweep already took
// starts nothing.
func (s *Server) startWakeSweep() {
	names, look := s.bell.Take()
	switch {
	case look:
		s.startSweep(true, nil)
	case len(names) > 0:
		s.startSweep(true, names)
	}
}

// startSweep runs the next sweep on a copy of the stats: the copy becomes
// the stats only if the sweep completes. Until it is settled the loop
// leaves the stats alone, whose replay memory the copy reads. names nil
// lists the directory; otherwise the sweep opens only the requests named.
func (s *Server) startSweep(fromWake bool, names []string) {
	s.gen++
	ctx, cancel := context.WithCancel(s.cell)
	s.flight = &flight{gen: s.gen, cancel: cancel, fromWake: fromWake, named: names != nil}
	s.tasks.add()
	go s.sweep(ctx, s.gen, s.stats.forSweep(), names)
}

// sweep is one sweep's goroutine. A panic or an exit of the body is
// contained here and reported as a fault, and the report always arrives
// unless the loop has ended.
func (s *Server) sweep(ctx context.Context, gen uint64, stats Stats, names []string) {
	defer s.tasks.done()
	r := sweepResult{gen: gen}
	finished := false
	defer func() {
		if !finished {
			r.fault = "exit" // runtime.Goexit: no panic value
			if p := recover(); p != nil {
				r.fault = typeName(p)
			}
		}
		select {
		case s.results <- r:
		case <-s.done:
		}
	}()
	sw := s.sweeper(&stats)
	sw.names = names
	r.err = sw.run(ctx)
	r.stats, r.progress, r.abandoned, r.unanswered = stats, sw.progress, sw.abandoned, sw.unanswered
	finished = true
}

// cancelSweep settles the in-flight sweep for Abort and Stop: up to
// abortWait for its own result, then its context is cancelled and it gets
// killGrace to return. A sweep that still has not returned (stuck in a
// policy or a hung file system) is abandoned: settled as failed now, its
// late result refused by generation.
func (s *Server) cancelSweep() {
	f := s.flight
	if f == nil {
		return
	}
	if r, ok := s.await(f, abortWait); ok {
		s.settle(r)
		return
	}
	f.cancel()
	if r, ok := s.await(f, s.hooks.killGrace); ok {
		s.settle(r)
		return
	}
	s.flight = nil
	s.cfg.Logger.Warn().Msg("execute_code rpc sweep did not return after cancellation; settling conservatively")
	s.settleFailed()
}

// await waits up to d for the current sweep's result, refusing stale ones.
func (s *Server) await(f *flight, d time.Duration) (sweepResult, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case r := <-s.results:
			if r.gen == f.gen {
				return r, true
			}
			s.refuseStale(r)
		case <-t.C:
			return sweepResult{}, false
		}
	}
}

// refuseStale drops the result of a sweep that was already settled as
// failed: its stats must never overwrite the settled ones.
func (s *Server) refuseStale(r sweepResult) {
	s.cfg.Logger.Debug().Uint64("generation", r.gen).Msg("execute_code rpc abandoned sweep returned late; result ignored")
	if s.hooks.onStale != nil {
		s.hooks.onStale(r.gen)
	}
}
