package privatetmp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/privfs"
)

// SpillPrefix names full-output spill files directly in the root:
// <root>/spill-XXXXXXXXXX.
const SpillPrefix = privfs.SpillPrefix

// ErrClosed is returned by a Root after Close.
var ErrClosed = errors.New("private staging root is closed")

// RootOptions configures OpenRoot.
type RootOptions struct {
	// TmpDir is where the root is created; "" means os.TempDir() ($TMPDIR,
	// else /tmp).
	TmpDir string
	// NodeName goes into the owner marker; "" means the host name.
	NodeName string
	// Logger receives debug and warning lines; nil discards them.
	Logger *zerolog.Logger
}

// Root is one process's private staging root <TMPDIR>/execute-code-private-XXXXXXXXXX
// (0700) with its owner marker .execute-code-owner (0600, "<node name>\n<pid>\n").
// Every workspace, bridge and spill of the process lives under it. A Root is
// safe for concurrent use.
type Root struct {
	tmpDir string
	path   string
	marker []byte
	log    *zerolog.Logger

	mu     sync.Mutex
	closed bool
	live   map[string]struct{}

	// reapMu serialises reaper windows; the fields below belong to it.
	reapMu    sync.Mutex
	lastReap  time.Time
	reaped    bool
	pending   map[string][]string // root path → names left for later windows
	staleRoot []string            // stale roots queued for the reaper, FIFO
}

// OpenRoot creates a new private staging root under opts.TmpDir and writes
// its owner marker through a private reservation. Both are created at their
// final mode and validated for type, mode and owner uid; if either fails
// validation the new root is removed and the error (ErrUnsafe) returned.
func OpenRoot(opts RootOptions) (*Root, error) {
	tmpDir := opts.TmpDir
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	tmpDir, err := filepath.Abs(tmpDir)
	if err != nil {
		return nil, fmt.Errorf("open private root: %w", err)
	}
	node := opts.NodeName
	if node == "" {
		if node, err = os.Hostname(); err != nil || node == "" {
			node = "localhost"
		}
	}
	// The marker is two lines; a node name that is blank or spans lines
	// would make our own marker unreadable as ours.
	if strings.TrimSpace(node) != node || node == "" || strings.ContainsAny(node, "\r\n") {
		return nil, fmt.Errorf("open private root: node name %q cannot go into an owner marker", node)
	}

	path, err := ReserveDir(tmpDir, rootPrefix)
	if err != nil {
		return nil, fmt.Errorf("open private root: %w", err)
	}
	r := &Root{
		tmpDir:  tmpDir,
		path:    path,
		marker:  formatMarker(node, os.Getpid()),
		log:     loggerOrNop(opts.Logger),
		live:    make(map[string]struct{}),
		pending: make(map[string][]string),
	}
	if err := WriteFile(path, markerName, r.marker); err != nil {
		_, _ = RemoveBounded(path, RemoveLimit)
		return nil, fmt.Errorf("open private root: %w", err)
	}
	if err := r.Validate(); err != nil {
		_, _ = RemoveBounded(path, RemoveLimit)
		return nil, fmt.Errorf("open private root: %w", err)
	}
	r.log.Debug().Str("root", path).Msg("private staging root created")
	return r, nil
}

// Path returns the root's path. It does not re-validate: call Validate
// before trusting the directory with a new object.
func (r *Root) Path() string { return r.path }

// Validate checks that the root is still a 0700 directory directly in the
// temp dir, owned by us, and that its marker is still the 0600 file we wrote
// with our content. Any failure (including a vanished root) is ErrUnsafe:
// the caller must not stage anything in it.
func (r *Root) Validate() error {
	if filepath.Dir(r.path) != r.tmpDir || !strings.HasPrefix(filepath.Base(r.path), rootPrefix+"-") {
		return fmt.Errorf("%w: private root is not a staging root name", ErrUnsafe)
	}
	if err := validateDir(r.path); err != nil {
		return unsafe("private root", err)
	}
	b, err := readMarker(r.path)
	if err != nil {
		return unsafe("private root", err)
	}
	if !bytes.Equal(b, r.marker) {
		return fmt.Errorf("%w: private root owner marker was rewritten", ErrUnsafe)
	}
	return nil
}

// unsafe makes every validation failure answer errors.Is(err, ErrUnsafe)
// while keeping the cause (fs.ErrNotExist, …) visible too.
func unsafe(what string, err error) error {
	if errors.Is(err, ErrUnsafe) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnsafe, what, err)
}

// NewSpill creates <root>/spill-XXXXXXXXXX as a private 0600 file
// open for writing, after re-validating the root. The spill is registered
// live before it is returned, so the reaper never takes it while its capture
// runs; call Release(f.Name()) when the capture finishes.
func (r *Root) NewSpill() (*os.File, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("new spill: %w", err)
	}
	// Create and register under the lock the reaper's live check holds, so
	// no window sees the new file before it is live.
	r.mu.Lock()
	f, err := ReserveFile(r.path, SpillPrefix)
	if err == nil {
		r.live[filepath.Clean(f.Name())] = struct{}{}
	}
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("new spill: %w", err)
	}
	return f, nil
}

// MarkLive registers path as an active capture's spill: the reaper skips it
// until Release.
func (r *Root) MarkLive(path string) {
	r.mu.Lock()
	r.live[filepath.Clean(path)] = struct{}{}
	r.mu.Unlock()
}

// Release ends the live registration of path; the spill becomes eligible
// for reaping once it is older than the TTL.
func (r *Root) Release(path string) {
	r.mu.Lock()
	delete(r.live, filepath.Clean(path))
	r.mu.Unlock()
}

// Close removes the marker and the root when the root holds nothing else.
// A root that still holds spills (whose paths callers may have handed out)
// or leftovers of a truncated teardown is kept with its marker, so a later
// boot's stale-root sweep can find it; that is not an error. Close is
// idempotent.
func (r *Root) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()

	if err := r.Validate(); err != nil {
		// Not ours any more (or gone): touch nothing.
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("close private root: %w", err)
	}
	if !onlyMarker(r.path) {
		r.log.Debug().Msg("private staging root kept: it still holds entries")
		return nil
	}
	if err := syscall.Unlink(filepath.Join(r.path, markerName)); err != nil {
		return fmt.Errorf("close private root: remove owner marker: %w", err)
	}
	if err := syscall.Rmdir(r.path); err != nil {
		return fmt.Errorf("close private root: %w", err)
	}
	return nil
}
