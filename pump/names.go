package pump

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Protocol names in the rpc directory (docs/protocol.md, Files).
const (
	reqPrefix    = KindRequest + "-"
	jsonSuffix   = ".json"
	claimSuffix  = ".claim"
	notifyPrefix = KindNotify + "-"
	textPrefix   = KindText + "-"
)

// responseName is the file the pump publishes to answer call id.
func responseName(id int64) string { return fmt.Sprintf("%s-%d%s", KindResponse, id, jsonSuffix) }

// markerName is the in-flight claim marker of call id.
func markerName(id int64) string { return fmt.Sprintf("req-%d.claim", id) }

// parseN parses a protocol number: a complete base-10 integer with an
// optional sign ("007" is 7, "-3" is -3, "+5" is 5). Numbers outside int64
// are not ids.
func parseN(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// entry is one protocol file found by a listing. n is meaningful only when
// valid is set; num and mac are the name's number as written and its MAC
// ("" when it carries none) for the script-written kinds.
type entry struct {
	name     string
	n        int64
	valid    bool
	num, mac string
	mode     fs.FileMode // type bits from the directory (lstat, never followed)
}

// listing is one read of the rpc directory, split by protocol name.
type listing struct {
	requests []entry // req-*.json, regular files and symlinks only
	markers  []entry // req-*.claim, regular files only
	notifies []entry // notify-*.json, any type
}

// listDir reads the directory with raw getdents64 and allocates only for
// protocol names a sweep acts on: response and text files stay in the
// directory for the whole run, so a long run's directory is mostly names
// every sweep skips, and a listing through os.File.ReadDir would allocate an
// entry for each of them on every sweep.
func listDir(dir string) (listing, error) {
	var l listing
	var addErr error
	err := scanDir(dir, func(name []byte, dtype byte) error {
		addErr = l.add(dir, name, dtype)
		return addErr
	})
	switch {
	case addErr != nil:
		return listing{}, addErr
	case err != nil:
		return listing{}, fmt.Errorf("list rpc directory: %w", err)
	}
	return l, nil
}

// scanDir calls each with every entry of dir but "." and "..", its name
// (valid only during the call) and its type as the directory reports it,
// with raw getdents64: one open and no other syscall per read, where an
// os.File also probes and resets the descriptor's blocking mode. An error
// of each ends the scan and is returned.
func scanDir(dir string, each func(name []byte, dtype byte) error) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	bufp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bufp)
	buf := *bufp
	for {
		n, err := ignoringEINTR(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			return nil
		}
		for rec := buf[:n]; len(rec) >= direntNameOffset; {
			reclen := int(binary.NativeEndian.Uint16(rec[16:18]))
			if reclen < direntNameOffset || reclen > len(rec) {
				return errors.New("malformed directory entry")
			}
			name := rec[direntNameOffset:reclen]
			if z := bytes.IndexByte(name, 0); z >= 0 {
				name = name[:z]
			}
			if string(name) != "." && string(name) != ".." {
				if err := each(name, rec[18]); err != nil {
					return err
				}
			}
			rec = rec[reclen:]
		}
	}
}

// linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1),
// then the NUL-terminated name.
const direntNameOffset = 19

var direntBufs = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

func ignoringEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// add files one directory entry by its protocol name; the name is copied
// only when kept.
func (l *listing) add(dir string, name []byte, dtype byte) error {
	isReq := bytes.HasPrefix(name, []byte(reqPrefix))
	isNotify := bytes.HasPrefix(name, []byte(notifyPrefix)) && bytes.HasSuffix(name, []byte(jsonSuffix))
	isRequest := isReq && bytes.HasSuffix(name, []byte(jsonSuffix))
	isMarker := isReq && bytes.HasSuffix(name, []byte(claimSuffix))
	if !isRequest && !isMarker && !isNotify {
		return nil
	}
	t, err := direntType(dir, name, dtype)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone since the listing
		}
		return fmt.Errorf("list rpc directory: %w", err)
	}
	switch {
	case isRequest:
		if t.IsRegular() || t&fs.ModeSymlink != 0 {
			l.requests = append(l.requests, newFrameEntry(string(name), reqPrefix, t))
		}
	case isMarker:
		if t.IsRegular() {
			l.markers = append(l.markers, newEntry(string(name), reqPrefix, claimSuffix, t))
		}
	case isNotify:
		l.notifies = append(l.notifies, newFrameEntry(string(name), notifyPrefix, t))
	}
	return nil
}

// direntType is the entry's type bits as the directory reports them, with
// an lstat (never following) for a file system that does not say.
func direntType(dir string, name []byte, dtype byte) (fs.FileMode, error) {
	switch dtype {
	case unix.DT_REG:
		return 0, nil
	case unix.DT_DIR:
		return fs.ModeDir, nil
	case unix.DT_LNK:
		return fs.ModeSymlink, nil
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, nil
	case unix.DT_SOCK:
		return fs.ModeSocket, nil
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, nil
	case unix.DT_BLK:
		return fs.ModeDevice, nil
	}
	fi, err := os.Lstat(filepath.Join(dir, string(name)))
	if err != nil {
		return 0, err
	}
	return fi.Mode().Type(), nil
}

// newFrameEntry is a script-written frame's entry: its number and MAC
// from the name (see parseFrameName).
func newFrameEntry(name, prefix string, t fs.FileMode) entry {
	f, _ := parseFrameName(name, prefix)
	return entry{name: name, n: f.n, valid: f.numbered, num: f.num, mac: f.mac, mode: t}
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
// It takes four system calls for a file that does not grow while it is
// read: the descriptor never enters the runtime's poller (a regular file
// cannot), and the one read asks for a byte more than the size, so a
// short read is the end of the file.
func readBounded(path string, follow bool, limit int64) ([]byte, error) {
	body, fd, err := readBoundedFD(path, follow, limit)
	if fd >= 0 {
		unix.Close(fd)
	}
	return body, err
}

// readBoundedFD is readBounded keeping the descriptor open (the caller
// closes it) when the read succeeds: the file the body came from, which
// the claim links as its marker. It is -1 on an error.
func readBoundedFD(path string, follow bool, limit int64) (body []byte, fd int, err error) {
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err = ignoringEINTR(func() (int, error) { return unix.Open(path, flags, 0) })
	if err != nil {
		return nil, -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	body, err = readOpen(fd, path, limit)
	if err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	return body, fd, nil
}

func readOpen(fd int, path string, limit int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotRegular
	}
	if st.Size > limit {
		return nil, errTooLarge
	}
	body := make([]byte, st.Size+1)
	n := 0
	for {
		m, err := ignoringEINTR(func() (int, error) { return unix.Read(fd, body[n:]) })
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		n += m
		if m == 0 || n < len(body) {
			return body[:n], nil
		}
		// It grew since the fstat: read on, to one byte past the bound.
		if int64(n) > limit {
			return nil, errTooLarge
		}
		body = append(body, make([]byte, min(int64(len(body)), limit+1-int64(len(body))))...)
	}
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
	cfg    Config
	bridge bridge
	stats  *Stats
	// names, when not nil, are the request names the bell rang with: the
	// sweep opens those instead of listing.
	names    []string
	progress int
	// abandoned counts the claims a cancelled sweep left unanswered: a
	// cancelled sweep that abandoned none has exact stats.
	abandoned int
	// unanswered counts dispatched claims whose answer could not be
	// published: their markers are left for recovery.
	unanswered int
}

func newSweeper(cfg Config, b bridge, stats *Stats) *sweeper {
	if stats == nil {
		stats = &Stats{} // nobody reads it, but the protocol still runs
	}
	stats.ensureMaps()
	return &sweeper{cfg: cfg.settled(), bridge: b.settled(), stats: stats}
}

func (s *sweeper) path(name string) string { return filepath.Join(s.cfg.Dir, name) }

// remove is the pump's only deletion: a plain unlink, best effort. A name
// already gone is not an error.
func (s *sweeper) remove(name string) error {
	err := s.bridge.unlink(s.path(name))
	switch {
	case err == nil:
		s.progress++
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return err
}
