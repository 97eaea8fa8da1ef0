package pump

import (
	"encoding/json"
	"maps"
	"slices"
)

// markerDeleteAttempts bounds how hard recovery tries to delete a marker;
// a survivor is inert because its id is remembered.
const markerDeleteAttempts = 3

// Recover pays each dead claim's debt exactly once (bridge.md §6.4):
// regular-file claim markers first, then ledger entries, both deduplicated
// by the replay memory. It writes answers; it never dispatches. Planted
// directories and symlinks at marker names are ignored outright. Recover
// is what a session owner runs after a sweep it abandoned; Sweep runs the
// marker half itself with an empty ledger.
func Recover(cfg Config, stats *Stats, ledger Ledger) error {
	s := newSweeper(cfg, stats)
	l, err := listDir(s.cfg.Dir)
	if err != nil {
		return err
	}
	s.recoverMarkers(l.markers, ledger)
	s.recoverLedger(ledger)
	return nil
}

func (s *sweeper) recoverMarkers(markers []entry, ledger Ledger) {
	stats := s.stats
	sortEntries(markers)
	for _, e := range markers {
		if !e.valid {
			_ = s.remove(e.name)
			continue
		}
		id := e.n
		if stats.seen(id) {
			// Cleanup only: the id was charged by whoever remembered it.
			s.ensureAnswered(id, MsgInterrupted)
		} else if content, ok := s.readSuccess(id); ok {
			stats.Calls++
			stats.Bytes += int64(len(content))
			stats.useTool(s.markerTool(ledger, id, e.name))
			stats.remember(id)
		} else {
			s.ensureAnswered(id, MsgInterrupted)
			stats.Calls++
			stats.Errors++
			stats.remember(id)
		}
		for range markerDeleteAttempts {
			if s.remove(e.name) == nil {
				break
			}
		}
	}
}

// markerTool names the tool a recovered success ran: the ledger's claimed
// entry when there is one (host-owned beats script-writable), else the
// marker body's own "tool" string.
func (s *sweeper) markerTool(ledger Ledger, id int64, name string) string {
	if e, ok := ledger[id]; ok && e.Kind == ClaimClaimed {
		return e.Tool
	}
	body, err := readBounded(s.path(name), false, maxRequestBytes)
	if err != nil {
		return ""
	}
	var fields map[string]json.RawMessage
	var tool string
	if json.Unmarshal(body, &fields) != nil || !isJSONString(fields["tool"]) || json.Unmarshal(fields["tool"], &tool) != nil {
		return ""
	}
	return tool
}

func (s *sweeper) recoverLedger(ledger Ledger) {
	stats := s.stats
	for _, id := range slices.Sorted(maps.Keys(ledger)) {
		if stats.seen(id) {
			continue
		}
		e := ledger[id]
		stats.Calls++
		stats.remember(id)
		switch e.Kind {
		case ClaimClaimed:
			if content, ok := s.readSuccess(id); ok {
				stats.Bytes += int64(len(content))
				stats.useTool(e.Tool)
				continue
			}
			// The tool may have run with effects no evidence records.
			s.ensureAnswered(id, MsgInterrupted)
			stats.Errors++
			stats.AccountingLoss = true
		case ClaimDenied:
			msg := msgDeniedNoTool
			if e.Tool != "" {
				msg = msgDenied(e.Tool)
			}
			s.ensureAnswered(id, msg)
			stats.Denied++
		case ClaimInvalid:
			s.ensureAnswered(id, MsgInvalid)
			stats.Errors++
		case ClaimUnknownTool:
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
