package privatetmp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"
)

// SweepReport counts what one boot-time stale-root sweep saw. It carries no
// paths: it may go to telemetry as it is.
type SweepReport struct {
	Examined int // lemon-private-* siblings considered
	Removed  int // stale roots that held only their marker, removed
	Retained int // stale roots with content, left untouched (queued for ReapSpills)
	Skipped  int // not provably stale: bad type, mode or owner, missing or malformed marker, live owner
}

// SweepStaleRoots runs once at boot. It considers each sibling
// <tmpDir>/lemon-private-* other than current, and only those whose
// validated 0600 owner marker names a process that kill(pid, 0) reports as
// gone (ESRCH). A stale root holding nothing but its marker is removed; a
// stale root with content is never traversed or removed here, only handed to
// current (if not nil) for ReapSpills, which looks at its top-level spills.
// Anything that does not validate is skipped: pid reuse only ever defers a
// cleanup to a later boot.
func SweepStaleRoots(tmpDir string, current *Root, logger *zerolog.Logger) SweepReport {
	var rep SweepReport
	log := loggerOrNop(logger)
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	abs, err := filepath.Abs(tmpDir)
	if err != nil {
		return rep
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		log.Debug().Err(err).Msg("stale-root sweep could not list the temp dir")
		return rep
	}
	var retained []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), RootPrefix+"-") {
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
	return rep
}
