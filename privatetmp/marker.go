package privatetmp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// RootPrefix names every private staging root: <tmp>/lemon-private-XXXXXXXXXX.
	RootPrefix = "lemon-private"
	// MarkerName is the owner marker inside a root: "<node name>\n<pid>\n".
	MarkerName = ".lemon-owner"
	// markerMax bounds what is read from a marker: a valid one is a host
	// name and a pid, so anything longer is malformed, not worth reading.
	markerMax = 4096
)

// marker is the parsed content of an owner marker.
type marker struct {
	node string
	pid  int
}

func formatMarker(node string, pid int) []byte {
	return []byte(node + "\n" + strconv.Itoa(pid) + "\n")
}

// parseMarker accepts what the reference accepts: the trimmed content splits
// on "\n" into exactly two parts, a non-empty node name and a positive
// decimal pid with nothing after it. The pid must also fit a Linux pid_t, so
// a huge number can never alias a real process through truncation.
func parseMarker(b []byte) (marker, bool) {
	parts := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(parts) != 2 || parts[0] == "" {
		return marker{}, false
	}
	digits := parts[1]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return marker{}, false
	}
	pid, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || pid <= 0 {
		return marker{}, false
	}
	return marker{node: parts[0], pid: int(pid)}, true
}

// readMarker reads the owner marker of root without following a symlink and
// without blocking on a planted FIFO. The marker must be a regular 0600 file
// owned by us both before opening (lstat) and as opened (fstat, same file),
// so a swap between the two is caught.
func readMarker(root string) ([]byte, error) {
	path := filepath.Join(root, MarkerName)
	before, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("owner marker: %w", err)
	}
	if err := checkInfo(MarkerName, before, false); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("owner marker: %w", err)
	}
	defer f.Close()
	after, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("owner marker: %w", err)
	}
	if err := checkInfo(MarkerName, after, false); err != nil {
		return nil, err
	}
	if !os.SameFile(before, after) {
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

// pidAlive answers kill(pid, 0). Only ESRCH proves death: EPERM means the
// process exists under another user, and any other answer is treated as
// alive so that doubt never leads to removing someone's root.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}

// staleOwner validates a sibling root completely (name, type, mode, owner
// uid, marker) and reports whether its marker names a dead process.
func staleOwner(tmpDir, root string) (dead bool, err error) {
	if filepath.Dir(root) != tmpDir || !strings.HasPrefix(filepath.Base(root), RootPrefix+"-") {
		return false, fmt.Errorf("%w: not a staging root name", ErrUnsafe)
	}
	if err := ValidateDir(root); err != nil {
		return false, err
	}
	b, err := readMarker(root)
	if err != nil {
		return false, err
	}
	m, ok := parseMarker(b)
	if !ok {
		return false, fmt.Errorf("%w: malformed %s", ErrUnsafe, MarkerName)
	}
	return !pidAlive(m.pid), nil
}

// onlyMarker reports whether dir holds its owner marker and nothing else.
// It reads at most two names: a non-empty root is never listed further.
func onlyMarker(dir string) bool {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return len(names) == 1 && names[0] == MarkerName
}

// removeEmptyRoot removes a root that holds only its marker: the marker is
// unlinked (never followed) and the directory removed with rmdir, which
// fails harmlessly if anything appeared in between.
func removeEmptyRoot(root string) bool {
	if !onlyMarker(root) {
		return false
	}
	if err := syscall.Unlink(filepath.Join(root, MarkerName)); err != nil {
		return false
	}
	return syscall.Rmdir(root) == nil
}
