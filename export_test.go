package executecode

import "time"

// SetReapInterval makes the registry of r look for idle kernels every d
// instead of every minute; call it before the first session.
func SetReapInterval(r *Runtime, d time.Duration) { r.reapInterval = d }

// RegisteredProcesses counts the processes in r's actor system: actors,
// futures and hand-made reply processes that have not been removed (0
// before the first session).
func RegisteredProcesses(r *Runtime) int {
	r.mu.Lock()
	tree := r.tree
	r.mu.Unlock()
	if tree == nil {
		return 0
	}
	n := 0
	for _, b := range tree.System.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += b.Count()
	}
	return n
}

// SetClock makes r's spill reaper read the time from now; call it before
// the first run.
func SetClock(r *Runtime, now func() time.Time) { r.now = now }
