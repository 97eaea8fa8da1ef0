package tools

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// openat2Missing is set once the kernel answered openat2 with ENOSYS
// (before Linux 5.6): reads take the full path from then on.
var openat2Missing atomic.Bool

// beneath is how every quick open resolves: below the root's descriptor
// only, through no magic link (docs/decisions.md).
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// openBeneath is the quick path of a named file's open: the kernel
// resolves the path below a descriptor of the root (openat2 with
// RESOLVE_BENEATH), in one call where resolve and os.Root take one per
// component of the root's own path and four more, and refuses anything
// that would leave the root on the way (a "..", an absolute link, a
// magic link). The file's type is read on a path-only descriptor first,
// so a FIFO, a socket or a device is never opened, and again on the
// opened one, which must be the same file. ok is false whenever this
// gives no regular file; the caller then takes the full path (resolve,
// os.Root), which decides and words every refusal as before, and follows
// an absolute link that stays inside the root. An absolute p takes the
// full path too: its errors name it by its resolved path, which only the
// full resolution knows.
func (r root) openBeneath(p string) (f *os.File, fi fs.FileInfo, ok bool) {
	if openat2Missing.Load() || filepath.IsAbs(p) {
		return nil, nil, false
	}
	rel, inside := r.inside(r.lexical(p))
	if !inside || rel == "." {
		return nil, nil, false
	}
	// The root's own name is not followed, and the directory opened must
	// be the one the tools were made on: a root or a parent of it swapped
	// for a link since is for the full path to refuse.
	dir, err := unix.Open(r.real, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, false
	}
	defer unix.Close(dir)
	var top unix.Stat_t
	if unix.Fstat(dir, &top) != nil || top.Dev != r.dev || top.Ino != r.ino || r.ino == 0 {
		return nil, nil, false
	}
	probe, err := openat2(dir, rel, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, nil, false
	}
	var want unix.Stat_t
	err = unix.Fstat(probe, &want)
	unix.Close(probe)
	if err != nil || want.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, false
	}
	fd, err := openat2(dir, rel, openFlags|unix.O_CLOEXEC)
	if err != nil {
		return nil, nil, false
	}
	f = os.NewFile(uintptr(fd), rel)
	fi, err = f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !sameFile(fi, &want) {
		f.Close() // swapped since the probe: the full path decides
		return nil, nil, false
	}
	return f, fi, true
}

// openat2 opens path below dir as openBeneath resolves, retrying EINTR.
func openat2(dir int, path string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: beneath}
	for {
		fd, err := unix.Openat2(dir, path, &how)
		switch err {
		case unix.EINTR:
			continue
		case unix.ENOSYS:
			openat2Missing.Store(true)
		}
		return fd, err
	}
}

// sameFile says whether fi is the file st describes.
func sameFile(fi fs.FileInfo, st *unix.Stat_t) bool {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	return ok && sys.Dev == st.Dev && sys.Ino == st.Ino
}
