package privfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DeadRootReport counts what RemoveDeadRoot did; it carries no paths.
type DeadRootReport struct {
	Removed  int  // top-level entries removed
	Spills   int  // spill files kept
	Left     int  // entries the budget or an error left in place
	RootGone bool // the root itself is gone
}

// RemoveDeadRoot removes what a dead host left in its staging root: every
// top-level entry except the full-output spills (regular files named
// pi-python-repl-*), whose paths that host handed out and which stay
// readable for their 24 hours, each removed like a workspace (never
// following a symlink) from one budget of limit visits. The marker goes
// last, with the root, and only once nothing else is left, so a root the
// budget could not empty stays recognisable to a later start's stale-root
// sweep.
//
// root must be an absolute, clean path named lemon-private-*, a 0700
// directory (not a link) owned by the effective uid, whose owner marker
// names pid; anything else is ErrUnsafe and nothing is touched.
func RemoveDeadRoot(root string, pid, limit int) (DeadRootReport, error) {
	var rep DeadRootReport
	if !filepath.IsAbs(root) || filepath.Clean(root) != root || !strings.HasPrefix(filepath.Base(root), RootPrefix+"-") {
		return rep, fmt.Errorf("%w: %q is not a staging root path", ErrUnsafe, root)
	}
	parent, err := unix.Open(filepath.Dir(root), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return rep, fmt.Errorf("dead root: open temp dir: %w", err)
	}
	defer unix.Close(parent)
	base := filepath.Base(root)
	rfd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		rep.RootGone = true
		return rep, nil
	}
	if err != nil {
		// ELOOP or ENOTDIR: a link or a file where the root was.
		return rep, fmt.Errorf("%w: dead root: %w", ErrUnsafe, err)
	}
	dir := os.NewFile(uintptr(rfd), base)
	defer dir.Close()
	fi, err := dir.Stat()
	if err != nil {
		return rep, fmt.Errorf("dead root: %w", err)
	}
	if err := CheckInfo(base, fi, true); err != nil {
		return rep, err
	}
	// The marker as seen through the opened root, so a root swapped after
	// the open cannot lend its marker to another directory.
	b, err := readMarkerAt(rfd)
	if err != nil {
		return rep, err
	}
	if _, owner, ok := ParseMarker(b); !ok || owner != pid {
		return rep, fmt.Errorf("%w: the owner marker does not name pid %d", ErrUnsafe, pid)
	}

	fd := rfd
	budget := limit
	for budget > 0 {
		// A bounded batch at a time: a root with a million planted names
		// is never listed whole.
		names, err := dir.Readdirnames(256)
		for _, name := range names {
			if name == MarkerName {
				continue
			}
			if isSpill(fd, name) {
				rep.Spills++
				continue
			}
			done, _ := removeAt(fd, name, &budget)
			if done && !exists(fd, name) {
				rep.Removed++
			} else {
				rep.Left++
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("dead root: list: %w", err)
		}
	}
	if rep.Spills > 0 || rep.Left > 0 || !onlyMarker(fd) {
		return rep, nil
	}
	if err := unix.Unlinkat(fd, MarkerName, 0); err != nil {
		return rep, fmt.Errorf("dead root: remove owner marker: %w", err)
	}
	// rmdir fails harmlessly if anything appeared since.
	if err := unix.Unlinkat(parent, base, unix.AT_REMOVEDIR); err != nil {
		return rep, fmt.Errorf("dead root: %w", err)
	}
	rep.RootGone = true
	return rep, nil
}

// isSpill reports whether name is a spill: the prefix and a regular file
// (lstat), so a directory or link named like one is removed.
func isSpill(dirfd int, name string) bool {
	if !strings.HasPrefix(name, SpillPrefix+"-") {
		return false
	}
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

func exists(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// onlyMarker reports whether the directory holds its owner marker and
// nothing else, reading at most two names of a fresh listing.
func onlyMarker(dirfd int) bool {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return len(names) == 1 && names[0] == MarkerName
}

// OnlyMarker reports whether the directory at path holds its owner marker
// and nothing else, reading at most two names; a link is never followed.
func OnlyMarker(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return onlyMarker(fd)
}
