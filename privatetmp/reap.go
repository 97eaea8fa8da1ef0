package privatetmp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// spillTTL is how old a finished spill must be before it may be reaped,
	// and also the length of one reaper window.
	spillTTL = 24 * time.Hour
	// reapBatch is the number of directory entries one reaper window may
	// examine across the current root and one stale root.
	reapBatch = 1000
)

// ReapReport counts what one reaper window did. It carries no paths.
type ReapReport struct {
	Due          bool // false: the previous window is less than 24 hours (spillTTL) old; nothing was examined
	Examined     int  // directory entries consumed from the window's budget (any name)
	Removed      int  // expired spills removed
	Skipped      int  // spill-named entries kept: live, recent, not a regular file, or gone
	Continued    int  // entries left over for later windows, over all roots
	RootsRemoved int  // stale roots that ended up holding only their marker and were removed
}

// ReapSpills runs one reaper window if one is due (the first call always is,
// later ones once spillTTL has passed since the previous window started).
// A window examines at most reapBatch direct entries: first the current
// root's next batch, then, if budget remains, the next queued stale root
// (re-validated as stale first) with what is left. An entry is removed only
// when it is named spill-*, lstat shows a regular file, its mtime
// is more than spillTTL before now, and it is not live. Nothing is followed
// and nothing below the top level is looked at. Names beyond the budget are
// remembered and examined in later windows.
func (r *Root) ReapSpills(now time.Time) ReapReport {
	r.reapMu.Lock()
	defer r.reapMu.Unlock()
	if r.reaped && now.Sub(r.lastReap) < spillTTL {
		return ReapReport{}
	}
	r.reaped, r.lastReap = true, now
	rep := ReapReport{Due: true}
	cutoff := now.Add(-spillTTL)

	budget := reapBatch
	if r.Validate() == nil {
		budget -= r.reapRoot(r.path, budget, cutoff, &rep)
	} else {
		delete(r.pending, r.path)
	}
	if budget > 0 && len(r.staleRoot) > 0 {
		root := r.staleRoot[0]
		r.staleRoot = slices.Delete(r.staleRoot, 0, 1)
		if dead, err := staleOwner(r.tmpDir, root); err != nil || !dead {
			// No longer provably stale: forget it for this process.
			delete(r.pending, root)
		} else {
			r.reapRoot(root, budget, cutoff, &rep)
			if _, more := r.pending[root]; more {
				r.staleRoot = append(r.staleRoot, root)
			} else if removeEmptyRoot(root) {
				rep.RootsRemoved++
			}
		}
	}
	for _, rest := range r.pending {
		rep.Continued += len(rest)
	}
	return rep
}

// reapRoot examines the next batch of at most budget names of root's top
// level and returns how many it consumed.
func (r *Root) reapRoot(root string, budget int, cutoff time.Time, rep *ReapReport) int {
	dir, err := os.OpenFile(root, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		delete(r.pending, root)
		return 0
	}
	defer dir.Close()
	names, ok := r.pending[root]
	if !ok {
		if names, err = dir.Readdirnames(-1); err != nil {
			return 0
		}
		slices.Sort(names)
	}
	delete(r.pending, root)
	if len(names) > budget {
		r.pending[root] = names[budget:]
		names = names[:budget]
	}
	fd := int(dir.Fd())
	for _, name := range names {
		rep.Examined++
		if !strings.HasPrefix(name, SpillPrefix+"-") {
			continue
		}
		if r.reapSpill(fd, root, name, cutoff) {
			rep.Removed++
		} else {
			rep.Skipped++
		}
	}
	return len(names)
}

// reapSpill removes one expired, regular, not-live spill. The live check and
// the unlink happen under the live-set lock so a spill registered at that
// moment is never taken.
func (r *Root) reapSpill(dirfd int, root, name string, cutoff time.Time) bool {
	if !expiredSpill(dirfd, name, cutoff) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, live := r.live[filepath.Join(root, name)]; live {
		return false
	}
	// unlinkat without AT_REMOVEDIR: a directory swapped in is refused, a
	// symlink swapped in loses only the link.
	return unix.Unlinkat(dirfd, name, 0) == nil
}

// expiredSpill reports whether name (lstat, never followed) is a regular
// file last modified before cutoff.
func expiredSpill(dirfd int, name string, cutoff time.Time) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && time.Unix(st.Mtim.Sec, st.Mtim.Nsec).Before(cutoff)
}
