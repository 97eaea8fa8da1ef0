package pump

import (
	"context"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxCleanupEntries bounds the protocol files Stop unlinks
// (docs/protocol.md, Layout and teardown); whatever is left goes with the
// bridge base's bounded removal.
const maxCleanupEntries = 10000

// settle decides the fate of the current sweep from its result: a fault, or
// a cancellation that left claims unanswered, is a failed sweep; anything
// else returned exact stats. A cancelled sweep that abandoned nothing
// answered every claim it made, so its stats are as good as a completed
// sweep's.
func (s *Server) settle(r sweepResult) {
	s.flight.cancel() // a faulted sweep's dispatches stop with it
	s.flight = nil
	switch {
	case r.fault != "":
		s.cfg.Logger.Error().Msgf("execute_code rpc sweep failed (%s); settling conservatively", r.fault)
		s.settleFailed()
	case r.abandoned > 0 && s.run:
		// A per-call run keeps what its cancelled sweep counted, as a
		// killed sweep counts it (dispatch.go, abandon): each abandoned
		// claim one call and one error, its marker left for the
		// workspace's teardown. A session cell's stats carry the loss
		// flag to its caller, so they are settled conservatively instead.
		s.stats = r.stats
		s.stats.adopt()
		s.takeLedger()
	case r.abandoned > 0:
		s.settleFailed()
	default:
		if r.err != nil && !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
			s.cfg.Logger.Warn().Err(r.err).Msg("execute_code rpc sweep failed")
		}
		s.settleCompleted(r.stats, r.unanswered > 0)
	}
}

// settleFailed keeps the stats from before the sweep, flags the loss and
// pays the dead sweep's debts from its markers and the ledger.
func (s *Server) settleFailed() {
	// An abandoned sweep may still read the replay memory it started
	// from: later sweeps get a memory of their own to fold into.
	s.stats = s.stats.Clone()
	ledger := s.takeLedger()
	s.stats.AccountingLoss = true
	s.recoverClaims(ledger)
}

// settleCompleted adopts the sweep's stats and runs the same recovery as a
// failed sweep (deduplicated by the replay memory) when it can change
// anything: when the sweep left markers it could not answer, or the
// ledger holds an id the stats do not remember (an abandoned sweep's late
// feeds). Every other entry of a completed sweep's ledger precedes a spend
// the sweep made, so recovery would only list the directory again.
func (s *Server) settleCompleted(stats Stats, leftMarkers bool) {
	s.stats = stats
	s.stats.adopt()
	if ledger := s.takeLedger(); leftMarkers || s.hasUnseen(ledger) {
		s.recoverClaims(ledger)
	}
}

// absorbLateFeeds charges what abandoned sweeps recorded after they were
// settled, before the stats are read: with no sweep in flight, every
// ledger entry is such a late feed, and one whose id is not remembered is
// a spent call slot no settlement has paid yet.
func (s *Server) absorbLateFeeds() {
	if ledger := s.takeLedger(); s.hasUnseen(ledger) {
		s.recoverClaims(ledger)
	}
}

func (s *Server) hasUnseen(ledger claimLedger) bool {
	for id := range ledger {
		if !s.stats.seen(id) {
			return true
		}
	}
	return false
}

// takeLedger returns the ledger and starts an empty one.
func (s *Server) takeLedger() claimLedger {
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	l := s.ledger
	s.ledger = claimLedger{}
	return l
}

// recoverClaims runs recovery on a copy of the stats and adopts it only
// if it succeeds: a failing recovery keeps the previous stats.
func (s *Server) recoverClaims(ledger claimLedger) {
	stats := s.stats.Clone()
	err := s.contain(func() error { return s.sweeper(&stats).recoverDebts(ledger) })
	if err != nil {
		s.cfg.Logger.Error().Msgf("execute_code rpc claim recovery failed (%s); keeping previous stats", faultClass(err))
		return
	}
	s.stats = stats
}

// drain is the last pass of DrainAndStats, Stop and a run's end, on the
// server's stats: notifications and unsettled markers, never a request
// (drainListing). A failure is logged and ignored.
func (s *Server) drain() {
	stats := s.stats.Clone()
	err := s.contain(func() error {
		s.sweeper(&stats).drainListing()
		return nil
	})
	if err != nil {
		s.cfg.Logger.Error().Msgf("execute_code rpc notification drain failed (%s)", faultClass(err))
		return
	}
	s.stats = stats
}

// panicError carries a contained panic's type, never its payload.
type panicError struct{ typ string }

func (e panicError) Error() string { return "panic: " + e.typ }

// faultClass names what failed for a log line: a contained panic's type,
// or an error's type (never its text, which may carry anything).
func faultClass(err error) string {
	var p panicError
	if errors.As(err, &p) {
		return p.typ
	}
	return typeName(err)
}

// contain runs fn, turning a panic into an error naming its type. The
// loop must outlive anything a file system or a callback does to it.
func (s *Server) contain(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError{typ: typeName(p)}
		}
	}()
	return fn()
}

// removeProtocolFiles is Stop's hygiene: the first 10,000 entries of the
// bridge directory, each a plain unlink; a directory is skipped, never
// entered.
func (s *Server) removeProtocolFiles() {
	var names []string
	_ = scanDir(s.cfg.Dir, func(name []byte, dtype byte) error {
		if len(names) == maxCleanupEntries {
			return errEnough
		}
		if dtype == unix.DT_UNKNOWN {
			// A file system without types in its entries: ask, without
			// following a link.
			var st unix.Stat_t
			if unix.Lstat(filepath.Join(s.cfg.Dir, string(name)), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				dtype = unix.DT_DIR
			}
		}
		names = append(names, string(name))
		if dtype == unix.DT_DIR {
			names[len(names)-1] = "" // counted, never removed
		}
		return nil
	})
	for _, name := range names {
		if name != "" {
			_ = s.bridge.unlink(filepath.Join(s.cfg.Dir, name))
		}
	}
}

// errEnough ends a scan that has what it needs.
var errEnough = errors.New("enough entries")
