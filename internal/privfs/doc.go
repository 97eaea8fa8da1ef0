// Package privfs is the core of the private staging root: the names
// (root prefix, owner marker, spill prefix), reading and parsing the owner
// marker without following a link or blocking on a FIFO, and the bounded
// removal that never follows a symlink. It never creates anything;
// privatetmp owns everything else about staging.
//
// The guard, which outlives a host killed with SIGKILL and removes what
// that host left behind, is a python program (internal/proc/guard.py) that
// runs no host code: it repeats these names and the marker's rules, and
// the two must change together.
//
// It is the runtime's own machinery, with no compatibility promise.
package privfs
