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
	// tools.Result.Untrusted. A run's trust is untrusted when this is
	// set or tools.Webfetch is in ToolsUsed.
	Untrusted bool
}

// NewStats returns empty accounting.
func NewStats() Stats {
	return Stats{ToolsUsed: map[string]struct{}{}, Seen: map[int64]struct{}{}}
}

// SortedTools lists ToolsUsed in ascending order.
func (s Stats) SortedTools() []string {
	return slices.Sorted(maps.Keys(s.ToolsUsed))
}

// Clone returns a deep copy, so a sweep can work on a copy its owner
// adopts only if the sweep completes.
func (s Stats) Clone() Stats {
	c := s
	c.ToolsUsed = maps.Clone(s.ToolsUsed)
	c.Seen = maps.Clone(s.Seen)
	c.ensureMaps()
	return c
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
	_, ok := s.Seen[id]
	return ok
}

func (s *Stats) remember(id int64) { s.Seen[id] = struct{}{} }

func (s *Stats) useTool(name string) {
	if name != "" {
		s.ToolsUsed[name] = struct{}{}
	}
}
