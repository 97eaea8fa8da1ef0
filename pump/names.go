package pump

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Protocol names in the rpc directory (bridge.md §3.2).
const (
	reqPrefix    = "req-"
	jsonSuffix   = ".json"
	claimSuffix  = ".claim"
	notifyPrefix = "notify-"
	textPrefix   = "text-"
)

// RequestName is the file a script publishes for call id.
func RequestName(id int64) string { return fmt.Sprintf("req-%d.json", id) }

// ResponseName is the file the pump publishes to answer call id.
func ResponseName(id int64) string { return fmt.Sprintf("res-%d.json", id) }

// MarkerName is the in-flight claim marker of call id.
func MarkerName(id int64) string { return fmt.Sprintf("req-%d.claim", id) }

// parseN parses a protocol number: a complete base-10 integer with an
// optional sign ("007" is 7, "-3" is -3, "+5" is 5). Numbers outside int64
// are not ids.
func parseN(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// entry is one protocol file found by a listing. n is meaningful only when
// valid is set.
type entry struct {
	name  string
	n     int64
	valid bool
	mode  fs.FileMode // type bits from the directory (lstat, never followed)
}

// listing is one read of the rpc directory, split by protocol name.
type listing struct {
	requests []entry // req-*.json, regular files and symlinks only
	markers  []entry // req-*.claim, regular files only
	notifies []entry // notify-*.json, any type
}

func listDir(dir string) (listing, error) {
	f, err := os.Open(dir)
	if err != nil {
		return listing{}, fmt.Errorf("list rpc directory: %w", err)
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return listing{}, fmt.Errorf("list rpc directory: %w", err)
	}
	var l listing
	for _, de := range des {
		name := de.Name()
		t := de.Type()
		switch {
		case strings.HasPrefix(name, reqPrefix) && strings.HasSuffix(name, jsonSuffix):
			if t.IsRegular() || t&fs.ModeSymlink != 0 {
				l.requests = append(l.requests, newEntry(name, reqPrefix, jsonSuffix, t))
			}
		case strings.HasPrefix(name, reqPrefix) && strings.HasSuffix(name, claimSuffix):
			if t.IsRegular() {
				l.markers = append(l.markers, newEntry(name, reqPrefix, claimSuffix, t))
			}
		case strings.HasPrefix(name, notifyPrefix) && strings.HasSuffix(name, jsonSuffix):
			l.notifies = append(l.notifies, newEntry(name, notifyPrefix, jsonSuffix, t))
		}
	}
	return l, nil
}

func newEntry(name, prefix, suffix string, t fs.FileMode) entry {
	mid := strings.TrimSuffix(strings.TrimPrefix(name, prefix), suffix)
	n, ok := parseN(mid)
	return entry{name: name, n: n, valid: ok, mode: t}
}

// sortEntries orders valid numbers ascending (ties by name), then invalid
// names by name.
func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int {
		if a.valid != b.valid {
			if a.valid {
				return -1
			}
			return 1
		}
		if a.valid {
			if c := cmp.Compare(a.n, b.n); c != 0 {
				return c
			}
		}
		return strings.Compare(a.name, b.name)
	})
}

var errNotRegular = errors.New("not a regular file")
var errTooLarge = errors.New("file too large")

// readBounded reads a regular file of at most limit bytes. Without follow
// a symlink is refused (O_NOFOLLOW); with it the target must still be a
// regular file. O_NONBLOCK keeps a planted FIFO from blocking the open.
func readBounded(path string, follow bool, limit int64) ([]byte, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	if fi.Size() > limit {
		return nil, errTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, errTooLarge
	}
	return body, nil
}

// isRegular reports whether path exists as a regular file, not following
// a link.
func isRegular(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular()
}

// sweeper is one pass over the rpc directory: the settled config, the
// stats it mutates and how many protocol entries it consumed. Progress is
// what tells a real wake-up from a spurious one, so only entries the pump
// actually removed or renamed count: a planted directory or a read-only
// rpc dir cannot make every ring look productive.
type sweeper struct {
	cfg      Config
	stats    *Stats
	progress int
	// abandoned counts the claims a cancelled sweep left unanswered: a
	// cancelled sweep that abandoned none has exact stats.
	abandoned int
	// unanswered counts dispatched claims whose answer could not be
	// published: their markers are left for recovery.
	unanswered int
}

func newSweeper(cfg Config, stats *Stats) *sweeper {
	if stats == nil {
		stats = &Stats{} // nobody reads it, but the protocol still runs
	}
	stats.ensureMaps()
	return &sweeper{cfg: cfg.settled(), stats: stats}
}

func (s *sweeper) path(name string) string { return filepath.Join(s.cfg.Dir, name) }

// remove is the pump's only deletion: a plain unlink, best effort. A name
// already gone is not an error.
func (s *sweeper) remove(name string) error {
	err := s.cfg.unlink(s.path(name))
	switch {
	case err == nil:
		s.progress++
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return err
}
