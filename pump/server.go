package pump

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStopped is what DrainAndStats returns once the server is gone; the
// caller must treat the cell's accounting as lost (docs/architecture.md,
// Rules: lost accounting is never trusted).
var ErrStopped = errors.New("pump server stopped")

// abortWait is how long Abort lets an in-flight sweep finish on its own
// before cancelling it.
const abortWait = 25 * time.Millisecond

// Server is a session cell's RPC server (docs/protocol.md, A session
// cell's server): it sweeps the
// cell's bridge directory on doorbell wake-ups and a fallback timer, one
// sweep at a time, and keeps the claim ledger in its own memory, where
// the script cannot reach it. A sweep that dies (panics, exits, or is
// cancelled with claims in flight) is settled conservatively: the stats
// from before it, the accounting-loss flag, and recovery of every claim
// it made from its markers and the ledger.
//
// One goroutine (the loop) owns the stats and the in-flight sweep; each
// sweep runs on its own goroutine, on a copy of the stats, under a
// context derived from the cell signal. The ledger is the only state a
// sweep writes that the loop reads: it is appended under ledgerMu,
// synchronously, before the spend it records, so it stays readable after
// a sweep is abandoned.
type Server struct {
	cfg         Config
	cell        context.Context
	abortCell   context.CancelFunc
	wake        <-chan struct{}
	unsubscribe func()
	tasks       *taskGroup

	abortCh   chan struct{} // closed by Abort
	abortOnce sync.Once
	abortDone chan struct{} // closed by the loop once the abort is settled
	stopCh    chan struct{} // closed by Stop
	stopOnce  sync.Once
	drains    chan chan Stats
	results   chan sweepResult
	done      chan struct{} // closed when the loop has ended

	ledgerMu sync.Mutex
	ledger   Ledger

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
	return e.Tool, ok && e.Kind == ClaimClaimed
}

// flight is the sweep in progress.
type flight struct {
	gen      uint64
	cancel   context.CancelFunc
	fromWake bool
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

// StartServer validates cfg (a refusal wraps
// ErrInvalidConfig in a *ConfigError naming the key) and starts the
// server. It subscribes to cfg.Bells, so every request-bell ring sweeps,
// and sweeps on the fallback timer otherwise. cfg.OnClaim, if set, only
// observes: the ledger is always the server's own, recorded before the
// observer is called.
func StartServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		tasks:     newTaskGroup(),
		abortCh:   make(chan struct{}),
		abortDone: make(chan struct{}),
		stopCh:    make(chan struct{}),
		drains:    make(chan chan Stats),
		results:   make(chan sweepResult),
		done:      make(chan struct{}),
		ledger:    Ledger{},
		stats:     NewStats(),
	}
	observer := cfg.OnClaim
	cfg.OnClaim = func(id int64, kind ClaimKind, tool string) {
		s.ledgerMu.Lock()
		s.ledger.Record(id, kind, tool)
		s.ledgerMu.Unlock()
		if observer != nil {
			observer(id, kind, tool)
		}
	}
	cfg.tasks = s.tasks
	cfg.claimed = s.claimedLive
	cfg.notified = &notifyMemory{}
	s.cfg = cfg.settled()
	s.cell, s.abortCell = context.WithCancel(context.Background())
	s.wake, s.unsubscribe = cfg.Bells.Subscribe()
	s.tasks.add()
	go s.loop()
	return s, nil
}

// Abort stops the cell's bridge work: it cancels the cell signal (every
// dispatch
// sees its context end), lets an in-flight sweep finish for up to 25 ms,
// then cancels it and settles it as failed unless it returned exact
// stats. No sweep starts afterwards; the server stays up for
// DrainAndStats and Stop. Abort returns when the abort is settled, the
// server is gone, or ctx ends (the abort still completes).
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
	lost := NewStats()
	lost.AccountingLoss = true
	reply := make(chan Stats, 1)
	select {
	case s.drains <- reply:
	case <-s.done:
		return lost, ErrStopped
	case <-ctx.Done():
		return lost, fmt.Errorf("pump server stats: %w", ctx.Err())
	}
	select {
	case st := <-reply:
		return st, nil
	case <-ctx.Done():
		return lost, fmt.Errorf("pump server stats: %w", ctx.Err())
	}
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
	defer s.unsubscribe()

	interval := s.cfg.PollInterval
	poll := time.NewTimer(interval)
	defer poll.Stop()
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	defer pause.Stop()
	gate := wakeGate{max: interval}
	paused := false      // wake-ups wait for the pause timer (flood backoff)
	wakePending := false // a wake-up arrived while a sweep was in flight
	aborted := false
	abortCh := s.abortCh
	var waiting []chan Stats // DrainAndStats callers waiting for a sweep

	answer := func() {
		for _, reply := range waiting {
			s.absorbLateFeeds()
			s.drain()
			reply <- s.stats.Clone()
		}
		waiting = nil
	}

	for {
		var wakeC <-chan struct{}
		var pauseC, pollC <-chan time.Time
		if !aborted {
			wakeC = s.wake
			if paused {
				wakeC, pauseC = nil, pause.C
			}
			if s.flight == nil {
				pollC = poll.C
			}
		}
		select {
		case <-s.stopCh:
			s.cancelSweep()
			answer()
			s.drain()
			s.removeProtocolFiles()
			return

		case <-abortCh:
			abortCh, aborted = nil, true
			s.cancelSweep()
			answer()
			close(s.abortDone)

		case reply := <-s.drains:
			waiting = append(waiting, reply)
			if s.flight == nil {
				answer()
			}

		case r := <-s.results:
			if s.flight == nil || r.gen != s.flight.gen {
				s.refuseStale(r)
				continue
			}
			fromWake := s.flight.fromWake
			s.settle(r)
			answer()
			if aborted {
				continue
			}
			if s.cfg.onSweep != nil {
				s.cfg.onSweep(r.progress)
			}
			if r.progress > 0 {
				pause.Stop()
				paused = false
			}
			if d := gate.after(fromWake, r.progress); d > 0 {
				pause.Reset(d)
				paused = true
			}
			poll.Reset(interval)
			if wakePending && !paused {
				wakePending = false
				s.startSweep(true)
			}

		case <-wakeC:
			if s.flight != nil {
				wakePending = true
			} else {
				s.startSweep(true)
			}

		case <-pauseC:
			paused = false
			if wakePending && s.flight == nil {
				wakePending = false
				s.startSweep(true)
			}

		case <-pollC:
			s.startSweep(false)
		}
	}
}

// startSweep runs the next sweep on a copy of the stats: the copy becomes
// the stats only if the sweep completes.
func (s *Server) startSweep(fromWake bool) {
	s.gen++
	ctx, cancel := context.WithCancel(s.cell)
	s.flight = &flight{gen: s.gen, cancel: cancel, fromWake: fromWake}
	s.tasks.add()
	go s.sweep(ctx, s.gen, s.stats.Clone())
}

// sweep is one sweep's goroutine. A panic or an exit of the body is
// contained here and reported as a fault, and the report always arrives
// unless the loop has ended.
func (s *Server) sweep(ctx context.Context, gen uint64, stats Stats) {
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
	sw := newSweeper(s.cfg, &stats)
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
	if r, ok := s.await(f, s.cfg.killGrace); ok {
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
	if s.cfg.onStale != nil {
		s.cfg.onStale(r.gen)
	}
}
