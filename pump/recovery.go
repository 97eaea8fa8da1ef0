package pump

import (
	"maps"
	"slices"
)

// markerDeleteAttempts bounds how hard recovery tries to delete a marker;
// a survivor is inert because its id is remembered.
const markerDeleteAttempts = 3

func (s *sweeper) recoverDebts(ledger claimLedger) error {
	l, err := listDir(s.cfg.Dir)
	if err != nil {
		return err
	}
	s.recoverMarkers(l.markers, ledger)
	s.recoverLedger(ledger)
	return nil
}

// recoverMarkers settles the regular-file markers a listing found. A
// marker is evidence only of a claim this pump made: its id is in the
// replay memory (cleanup only), or in the ledger as claimed (charged, with
// the ledger's tool). Any other marker was planted: the directory is
// script-writable, and a script of this run or another may put a marker
// next to a forged response to buy accounting for a call that never ran.
// It is removed and counted as an error, never as a call or a tool, and
// its id is not burnt, so the script's own request with that id still
// runs.
func (s *sweeper) recoverMarkers(markers []entry, ledger claimLedger) {
	stats := s.stats
	sortEntries(markers)
	for _, e := range markers {
		if !e.valid {
			_ = s.remove(e.name)
			continue
		}
		id := e.n
		tool, claimed := s.claimedTool(ledger, id)
		switch {
		case stats.seen(id):
			// Cleanup only: the id was charged by whoever remembered it.
			s.ensureAnswered(id, msgInterrupted)
		case !claimed:
			stats.Errors++
		default:
			if content, ok := s.readSuccess(id); ok {
				stats.Calls++
				stats.Bytes += int64(len(content))
				s.useDispatched(tool)
			} else {
				s.ensureAnswered(id, msgInterrupted)
				stats.Calls++
				stats.Errors++
			}
			stats.remember(id)
		}
		for range markerDeleteAttempts {
			if s.remove(e.name) == nil {
				break
			}
		}
	}
}

// claimedTool says whether this pump claimed id, and for which tool: the
// settlement's ledger first, then the live one. Both are host memory the
// script cannot reach; a marker's own body is never believed.
func (s *sweeper) claimedTool(ledger claimLedger, id int64) (string, bool) {
	if e, ok := ledger[id]; ok && e.Kind == claimClaimed {
		return e.Tool, true
	}
	if s.bridge.claimed != nil {
		return s.bridge.claimed(id)
	}
	return "", false
}

// useDispatched records a recovered call's tool, only if it is one this
// bridge serves: recovery must never list a tool no dispatch could run.
func (s *sweeper) useDispatched(tool string) {
	if s.cfg.serves(tool) {
		s.stats.useTool(tool)
	}
}

func (s *sweeper) recoverLedger(ledger claimLedger) {
	stats := s.stats
	for _, id := range slices.Sorted(maps.Keys(ledger)) {
		if stats.seen(id) {
			continue
		}
		e := ledger[id]
		stats.Calls++
		stats.remember(id)
		switch e.Kind {
		case claimClaimed:
			if content, ok := s.readSuccess(id); ok {
				stats.Bytes += int64(len(content))
				s.useDispatched(e.Tool)
				continue
			}
			// The tool may have run with effects no evidence records.
			s.ensureAnswered(id, msgInterrupted)
			stats.Errors++
			stats.AccountingLoss = true
		case claimDenied:
			msg := msgDeniedNoTool
			if e.Tool != "" {
				msg = msgDenied(e.Tool)
			}
			s.ensureAnswered(id, msg)
			stats.Denied++
		case claimInvalid:
			s.ensureAnswered(id, msgInvalid)
			stats.Errors++
		case claimUnknownTool:
			msg := msgUnavailableNoTool
			if e.Tool != "" {
				msg = msgUnavailable(e.Tool)
			}
			s.ensureAnswered(id, msg)
			stats.Errors++
		default:
			// A bare reservation (or anything unknown: fail closed): the
			// branch that would have settled it never ran. No answer; a
			// leftover request is refused later as a replay.
			stats.Errors++
		}
	}
}
