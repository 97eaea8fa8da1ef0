package privatetmp

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/executecode/executecode/internal/privfs"
)

const (
	// rootPrefix names every private staging root: <tmp>/execute-code-private-XXXXXXXXXX.
	rootPrefix = privfs.RootPrefix
	// markerName is the owner marker inside a root: "<node name>\n<pid>\n".
	markerName = privfs.MarkerName
)

// marker is the parsed content of an owner marker.
type marker struct {
	node string
	pid  int
}

func formatMarker(node string, pid int) []byte { return privfs.FormatMarker(node, pid) }

// parseMarker accepts what the reference accepts (privfs.ParseMarker).
func parseMarker(b []byte) (marker, bool) {
	node, pid, ok := privfs.ParseMarker(b)
	return marker{node: node, pid: pid}, ok
}

// readMarker reads the owner marker of root without following a symlink
// and without blocking on a planted FIFO (privfs.ReadMarker).
func readMarker(root string) ([]byte, error) { return privfs.ReadMarker(root) }

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
	if filepath.Dir(root) != tmpDir || !strings.HasPrefix(filepath.Base(root), rootPrefix+"-") {
		return false, fmt.Errorf("%w: not a staging root name", ErrUnsafe)
	}
	if err := validateDir(root); err != nil {
		return false, err
	}
	b, err := readMarker(root)
	if err != nil {
		return false, err
	}
	m, ok := parseMarker(b)
	if !ok {
		return false, fmt.Errorf("%w: malformed %s", ErrUnsafe, markerName)
	}
	return !pidAlive(m.pid), nil
}

// onlyMarker reports whether dir holds its owner marker and nothing else.
// It reads at most two names: a non-empty root is never listed further.
func onlyMarker(dir string) bool { return privfs.OnlyMarker(dir) }

// removeEmptyRoot removes a root that holds only its marker: the marker is
// unlinked (never followed) and the directory removed with rmdir, which
// fails harmlessly if anything appeared in between.
func removeEmptyRoot(root string) bool {
	if !onlyMarker(root) {
		return false
	}
	if err := syscall.Unlink(filepath.Join(root, markerName)); err != nil {
		return false
	}
	return syscall.Rmdir(root) == nil
}
