package privfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// removal is one unit of work on the stack: an entry to lstat and remove,
// or (rmdir set) a directory whose children have all been visited.
type removal struct {
	parent int      // directory fd the name is relative to
	name   string   // one path component, never containing a separator
	dir    *os.File // for an rmdir marker: the directory itself, closed at rmdir
	rmdir  bool
}

// RemoveBounded removes the tree at path with an iterative post-order walk
// that never follows a symlink, visiting at most limit entries: an entry
// costs one visit when it is examined (a directory is listed then), and a
// directory one more when its rmdir is attempted. A directory holding one
// file therefore needs 3 visits.
//
// Every step works relative to an open directory descriptor opened with
// O_NOFOLLOW, so swapping a directory for a symlink mid-walk cannot lead the
// removal outside the tree; a symlink is unlinked, its target never touched.
//
// complete is false when the budget ran out first; the remainder stays in
// place. Per-entry errors do not stop the walk. err is set only when the walk
// completed and path still exists, and then wraps the first entry error. A
// missing path is complete.
func RemoveBounded(path string, limit int) (complete bool, err error) {
	clean := filepath.Clean(path)
	base := filepath.Base(clean)
	if path == "" || base == "." || base == ".." || base == string(filepath.Separator) {
		return false, fmt.Errorf("remove %q: %w: not a removable tree", path, fs.ErrInvalid)
	}
	top, err := unix.Open(filepath.Dir(clean), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove tree: open parent: %w", err)
	}
	defer unix.Close(top)
	budget := limit
	complete, firstErr := removeAt(top, base, &budget)
	if !complete {
		return false, nil
	}
	if firstErr != nil {
		if _, err := os.Lstat(clean); err == nil {
			return true, fmt.Errorf("remove tree: %w", firstErr)
		}
	}
	return true, nil
}

// removeAt removes the tree name under the directory parent, spending
// visits from budget, and reports whether it finished and the first entry
// error it met.
func removeAt(parent int, name string, budget *int) (complete bool, firstErr error) {
	note := func(err error) {
		if err != nil && !errors.Is(err, unix.ENOENT) && firstErr == nil {
			firstErr = err
		}
	}
	stack := []removal{{parent: parent, name: name}}
	// Directories still open when the budget runs out are closed here.
	defer func() {
		for _, it := range stack {
			if it.dir != nil {
				it.dir.Close()
			}
		}
	}()
	for len(stack) > 0 {
		if *budget <= 0 {
			return false, firstErr
		}
		*budget--
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]

		if it.rmdir {
			it.dir.Close()
			note(unix.Unlinkat(it.parent, it.name, unix.AT_REMOVEDIR))
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(it.parent, it.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			note(err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			note(unix.Unlinkat(it.parent, it.name, 0))
			continue
		}
		dir, names, err := openDir(it.parent, it.name, -1)
		note(err)
		marker := removal{parent: it.parent, name: it.name, dir: dir, rmdir: true}
		stack = append(stack, marker)
		if dir == nil {
			// Unlistable: the rmdir attempt still costs its visit and
			// fails unless the directory is empty.
			continue
		}
		fd := int(dir.Fd())
		for _, n := range names {
			stack = append(stack, removal{parent: fd, name: n})
		}
	}
	return true, firstErr
}

// openDir opens name under parent without following a symlink and lists
// at most max names (all for max < 0). The returned file stays open: its
// children are removed relative to it.
func openDir(parent int, name string, max int) (*os.File, []string, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	dir := os.NewFile(uintptr(fd), name)
	names, err := dir.Readdirnames(max)
	if err != nil && !(max > 0 && errors.Is(err, io.EOF)) {
		dir.Close()
		return nil, nil, err
	}
	return dir, names, nil
}
