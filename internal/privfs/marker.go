package privfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// RootPrefix names every private staging root: <tmp>/execute-code-private-XXXXXXXXXX.
	RootPrefix = "execute-code-private"
	// MarkerName is the owner marker inside a root: "<node name>\n<pid>\n".
	MarkerName = ".execute-code-owner"
	// SpillPrefix names full-output spill files directly in a root:
	// <root>/spill-XXXXXXXXXX.
	SpillPrefix = "spill"
	// markerMax bounds what is read from a marker: a valid one is a host
	// name and a pid, so anything longer is malformed, not worth reading.
	markerMax = 4096

	dirMode  = 0o700
	fileMode = 0o600
)

// ErrUnsafe reports a private object whose type, mode or owner is not what
// was asked for. Callers fail closed on it: nothing runs, nothing is
// removed.
var ErrUnsafe = errors.New("private object failed validation")

// FormatMarker is the content of an owner marker.
func FormatMarker(node string, pid int) []byte {
	return []byte(node + "\n" + strconv.Itoa(pid) + "\n")
}

// ParseMarker accepts what the reference accepts: the trimmed content
// splits on "\n" into exactly two parts, a non-empty node name and a
// positive decimal pid with nothing after it. The pid must also fit a
// Linux pid_t, so a huge number can never alias a real process through
// truncation.
func ParseMarker(b []byte) (node string, pid int, ok bool) {
	parts := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(parts) != 2 || parts[0] == "" {
		return "", 0, false
	}
	digits := parts[1]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return parts[0], int(n), true
}

// ReadMarker reads the owner marker of root without following a symlink
// (neither the root nor the marker) and without blocking on a planted
// FIFO.
func ReadMarker(root string) ([]byte, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("owner marker: %w", err)
	}
	defer unix.Close(fd)
	return readMarkerAt(fd)
}

// readMarkerAt reads the marker in the open directory dirfd. The marker
// must be a regular 0600 file owned by the effective uid both before
// opening (lstat) and as opened (fstat, same file), so a swap between the
// two is caught.
func readMarkerAt(dirfd int) ([]byte, error) {
	var before unix.Stat_t
	if err := unix.Fstatat(dirfd, MarkerName, &before, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("owner marker: %w", &fs.PathError{Op: "lstat", Path: MarkerName, Err: err})
	}
	if err := checkStat(MarkerName, &before, false); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dirfd, MarkerName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("owner marker: %w", &fs.PathError{Op: "open", Path: MarkerName, Err: err})
	}
	f := os.NewFile(uintptr(fd), MarkerName)
	defer f.Close()
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("owner marker: %w", err)
	}
	if err := checkStat(MarkerName, &after, false); err != nil {
		return nil, err
	}
	if before.Dev != after.Dev || before.Ino != after.Ino {
		return nil, fmt.Errorf("%w: %s changed while opened", ErrUnsafe, MarkerName)
	}
	b, err := io.ReadAll(io.LimitReader(f, markerMax+1))
	if err != nil {
		return nil, fmt.Errorf("owner marker: %w", err)
	}
	if len(b) > markerMax {
		return nil, fmt.Errorf("%w: %s is too long", ErrUnsafe, MarkerName)
	}
	return b, nil
}

// checkStat is CheckInfo for a raw stat.
func checkStat(name string, st *unix.Stat_t, wantDir bool) error {
	want, kind, typ := uint32(fileMode), "regular file", uint32(unix.S_IFREG)
	if wantDir {
		want, kind, typ = dirMode, "directory", unix.S_IFDIR
	}
	if st.Mode&unix.S_IFMT != typ {
		return fmt.Errorf("%w: %s is not a %s", ErrUnsafe, name, kind)
	}
	if perm := st.Mode & 0o7777; perm != want {
		return fmt.Errorf("%w: %s has mode %04o, want %04o", ErrUnsafe, name, perm, want)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s is not owned by uid %d", ErrUnsafe, name, os.Geteuid())
	}
	return nil
}

// CheckInfo checks that fi is a directory (wantDir) at exactly 0700 or a
// regular file at exactly 0600, owned by the effective uid: the owner new
// objects get, so the one a private object must carry.
func CheckInfo(name string, fi fs.FileInfo, wantDir bool) error {
	want, kind := fs.FileMode(fileMode), "regular file"
	typeOK := fi.Mode().IsRegular()
	if wantDir {
		want, kind = dirMode, "directory"
		typeOK = fi.IsDir()
	}
	if !typeOK {
		return fmt.Errorf("%w: %s is not a %s", ErrUnsafe, name, kind)
	}
	if fi.Mode().Perm() != want {
		return fmt.Errorf("%w: %s has mode %04o, want %04o", ErrUnsafe, name, fi.Mode().Perm(), want)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s is not owned by uid %d", ErrUnsafe, name, os.Geteuid())
	}
	return nil
}
