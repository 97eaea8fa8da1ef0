package privatetmp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// SweepReport counts what one boot-time stale-root sweep saw. It carries no
// paths: it may go to telemetry as it is.
type SweepReport struct {
	Examined int // execute-code-private-* siblings considered
	Removed  int // stale roots that held only their marker, removed
	Retained int // stale roots with content, left untouched (queued for ReapSpills)
	Skipped  int // not provably stale: bad type, mode or owner, missing or malformed marker, live owner
}

// SweepStaleRoots runs once at boot. It considers each sibling
// <tmpDir>/execute-code-private-* other than current, and only those whose
// validated 0600 owner marker names a process that kill(pid, 0) reports as
// gone (ESRCH). A stale root holding nothing but its marker is removed; a
// stale root with content is never traversed or removed here, only handed to
// current (if not nil) for ReapSpills, which looks at its top-level spills.
// Anything that does not validate is skipped: pid reuse only ever defers a
// cleanup to a later boot.
func SweepStaleRoots(tmpDir string, current *Root, logger *zerolog.Logger) SweepReport {
	rep, _, _ := sweepStale(tmpDir, current, logger)
	return rep
}

// sweepStale is SweepStaleRoots, also returning the temp dir and the stale
// roots it retained.
func sweepStale(tmpDir string, current *Root, logger *zerolog.Logger) (rep SweepReport, abs string, retained []string) {
	log := loggerOrNop(logger)
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	abs, err := filepath.Abs(tmpDir)
	if err != nil {
		return rep, "", nil
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		log.Debug().Err(err).Msg("stale-root sweep could not list the temp dir")
		return rep, abs, nil
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), rootPrefix+"-") {
			continue
		}
		root := filepath.Join(abs, e.Name())
		if current != nil && root == current.path {
			continue
		}
		rep.Examined++
		dead, err := staleOwner(abs, root)
		if err != nil || !dead {
			rep.Skipped++
			continue
		}
		if removeEmptyRoot(root) {
			rep.Removed++
			continue
		}
		rep.Retained++
		retained = append(retained, root)
	}
	// Only siblings of the current root are its to reap: the reaper
	// re-validates each one against the current root's temp dir.
	if current != nil && current.tmpDir == abs && len(retained) > 0 {
		current.reapMu.Lock()
		for _, root := range retained {
			if !slices.Contains(current.staleRoot, root) {
				current.staleRoot = append(current.staleRoot, root)
			}
		}
		current.reapMu.Unlock()
	}
	log.Debug().Int("examined", rep.Examined).Int("removed", rep.Removed).
		Int("retained", rep.Retained).Int("skipped", rep.Skipped).Msg("stale private roots swept")
	return rep, abs, retained
}

// ReapStaleRoots is the boot-time sweep of a temp dir in which this
// process has no root (yet): a lazily opened spill root's. It is
// SweepStaleRoots, and then one reaper window over the stale roots it
// kept: their expired top-level spills are removed (at most reapBatch
// entries examined in all, sorted by name; the rest waits for a later
// start), and a root that ends up holding only its marker is removed too.
// Without it, such a root would wait for a start that overflows its
// output.
func ReapStaleRoots(tmpDir string, now time.Time, logger *zerolog.Logger) (SweepReport, ReapReport) {
	sweep, abs, retained := sweepStale(tmpDir, nil, logger)
	rep := ReapReport{Due: true}
	cutoff := now.Add(-spillTTL)
	budget := reapBatch
	for _, root := range retained {
		if budget <= 0 {
			break
		}
		if dead, err := staleOwner(abs, root); err != nil || !dead {
			continue
		}
		budget -= reapStaleRoot(root, budget, cutoff, &rep)
		if removeEmptyRoot(root) {
			rep.RootsRemoved++
		}
	}
	return sweep, rep
}

// reapStaleRoot examines at most budget of a stale root's top-level names
// and removes its expired spills; no spill of a dead owner is live.
func reapStaleRoot(root string, budget int, cutoff time.Time, rep *ReapReport) int {
	dir, err := os.OpenFile(root, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0
	}
	slices.Sort(names)
	if len(names) > budget {
		rep.Continued += len(names) - budget
		names = names[:budget]
	}
	fd := int(dir.Fd())
	for _, name := range names {
		rep.Examined++
		if !strings.HasPrefix(name, SpillPrefix+"-") {
			continue
		}
		if expiredSpill(fd, name, cutoff) && unix.Unlinkat(fd, name, 0) == nil {
			rep.Removed++
		} else {
			rep.Skipped++
		}
	}
	return len(names)
}
