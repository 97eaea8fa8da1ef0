package pump

import (
	"maps"
	"slices"
)

// Stats is one run's (or cell's) bridge accounting.
type Stats struct {
	Calls, Denied, Errors int
	Bytes                 int64
	ToolsUsed             map[string]struct{}
	// Seen is the replay memory: every id that was charged or answered
	// as charged.
	Seen            map[int64]struct{}
	NotifyForwarded int
	// AccountingLoss says the figures are a lower bound: a dispatched
	// call's outcome could not be proven.
	AccountingLoss bool
	// Untrusted says an accepted ok result was marked
	// tools.Result.Untrusted, or an error answered was a
	// tools.UntrustedError. A run's trust is untrusted when this is
	// set or tools.Webfetch is in ToolsUsed.
	Untrusted bool

	// prior is set only on a sweep's copy (forSweep): the replay memory
	// the sweep started from, which it reads and never writes, while Seen
	// holds what it remembered since. A script that floods requests past
	// its budget makes the replay memory large, and copying it for every
	// sweep would make each sweep cost as much as the whole run so far.
	prior map[int64]struct{}
}

// newStats returns empty accounting.
func newStats() Stats {
	return Stats{ToolsUsed: map[string]struct{}{}, Seen: map[int64]struct{}{}}
}

// SortedTools lists ToolsUsed in ascending order.
func (s Stats) SortedTools() []string {
	return slices.Sorted(maps.Keys(s.ToolsUsed))
}

// Clone returns a deep copy with one replay memory.
func (s Stats) Clone() Stats {
	c := s
	c.ToolsUsed = maps.Clone(s.ToolsUsed)
	c.Seen = maps.Clone(s.Seen)
	c.ensureMaps()
	for id := range s.prior {
		c.Seen[id] = struct{}{}
	}
	c.prior = nil
	return c
}

// forSweep returns the copy a sweep works on, which its owner adopts
// only if the sweep completes. The copy reads s's replay memory in place:
// s must not change it while the sweep may still run, and adopt folds
// the sweep's new ids into it.
func (s Stats) forSweep() Stats {
	c := s
	c.ToolsUsed = maps.Clone(s.ToolsUsed)
	c.prior = s.Seen
	if c.prior == nil {
		c.prior = map[int64]struct{}{}
	}
	c.Seen = map[int64]struct{}{}
	c.ensureMaps()
	return c
}

// adopt makes a sweep's copy whole again, folding what the sweep
// remembered into the replay memory it started from. Nothing else may
// read that memory any more.
func (s *Stats) adopt() {
	if s.prior == nil {
		return
	}
	for id := range s.Seen {
		s.prior[id] = struct{}{}
	}
	s.Seen, s.prior = s.prior, nil
}

func (s *Stats) ensureMaps() {
	if s.ToolsUsed == nil {
		s.ToolsUsed = map[string]struct{}{}
	}
	if s.Seen == nil {
		s.Seen = map[int64]struct{}{}
	}
}

func (s *Stats) seen(id int64) bool {
	if _, ok := s.Seen[id]; ok {
		return true
	}
	_, ok := s.prior[id]
	return ok
}

func (s *Stats) remember(id int64) { s.Seen[id] = struct{}{} }

func (s *Stats) useTool(name string) {
	if name != "" {
		s.ToolsUsed[name] = struct{}{}
	}
}
