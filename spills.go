package executecode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/tools"
)

// maxSpillEntries bounds the runtime's record of the spills it handed
// out; the oldest is forgotten first (and is then unreadable by
// placeholder, though its file stays until the reaper takes it).
const maxSpillEntries = 4096

// spillOwner is who may read a spill back (docs/decisions.md): the session
// scope of the call that produced it, or, for a call without an owner,
// the runtime's other owner-less calls.
type spillOwner struct {
	owned bool
	scope Scope
}

func spillOwnerOf(rn run) spillOwner {
	if rn.scope == nil {
		return spillOwner{}
	}
	return spillOwner{owned: true, scope: rn.scope.scope}
}

// spillEntry is one spill file the runtime created: where, and which
// inode, so a file planted under its name later is refused. owner is set
// once the spill's result names it; until then nobody may read it. The
// inode number alone does not identify the file: once it is removed, a
// file planted under its name may get the same number (tmpfs hands freed
// numbers out again), so its birth time must match too, where the file
// system records one (born is then set).
type spillEntry struct {
	dir, name string
	dev, ino  uint64
	born      bool
	btime     unix.StatxTimestamp
	owner     *spillOwner
}

// spillBook records the runtime's spills by file name.
type spillBook struct {
	byName map[string]*spillEntry
	order  []string
}

// recordSpill notes a spill file the runtime just created.
func (r *Runtime) recordSpill(f *os.File) {
	var st unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &st) != nil {
		return // unrecorded: never readable by placeholder
	}
	e := &spillEntry{dir: filepath.Dir(f.Name()), name: filepath.Base(f.Name()),
		dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino,
		born: st.Mask&unix.STATX_BTIME != 0, btime: st.Btime}
	r.spillMu.Lock()
	defer r.spillMu.Unlock()
	b := &r.spillBook
	if b.byName == nil {
		b.byName = make(map[string]*spillEntry)
	}
	if _, again := b.byName[e.name]; again {
		// A reaped spill's name came round again: the new file replaces
		// the old record, which keeps its place in the order.
		b.byName[e.name] = e
		return
	}
	if len(b.order) >= maxSpillEntries {
		delete(b.byName, b.order[0])
		b.order = b.order[1:]
	}
	b.byName[e.name] = e
	b.order = append(b.order, e.name)
}

// bindSpill gives the spill at path to owner: the result that names it is
// about to be handed out.
func (r *Runtime) bindSpill(path string, owner spillOwner) {
	r.spillMu.Lock()
	defer r.spillMu.Unlock()
	if e, ok := r.spillBook.byName[filepath.Base(path)]; ok && e.dir == filepath.Dir(path) && e.owner == nil {
		e.owner = &owner
	}
}

// errNotOwnSpill is the answer for a name that is not one of the caller's
// spills, whether it is another owner's, unknown or forgotten: the answer
// does not tell them apart, so it tells nothing about other sessions.
var errNotOwnSpill = missingSpill("not a spill file of this session")

// missingSpill is a spill error that answers errors.Is(err,
// fs.ErrNotExist) without saying so in its text, which the script reads.
type missingSpill string

func (m missingSpill) Error() string { return string(m) }

func (missingSpill) Unwrap() error { return fs.ErrNotExist }

// openSpillFor opens owner's spill name read-only, refusing a symlink, a
// FIFO or anything that is not the very file the runtime created.
func (r *Runtime) openSpillFor(owner spillOwner, name string) (*os.File, error) {
	r.spillMu.Lock()
	e, ok := r.spillBook.byName[name]
	var entry spillEntry
	if ok {
		entry = *e
	}
	r.spillMu.Unlock()
	if !ok || entry.owner == nil || *entry.owner != owner {
		return nil, errNotOwnSpill
	}
	dirfd, err := unix.Open(entry.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, spillGone(err)
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, errors.New("refused: a symlink stands where the spill file was")
	}
	if err != nil {
		return nil, spillGone(err)
	}
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		unix.Close(fd)
		return nil, spillGone(err)
	}
	if !entry.sameFile(&st) {
		unix.Close(fd)
		return nil, errors.New("refused: the spill file was replaced")
	}
	return os.NewFile(uintptr(fd), name), nil
}

// sameFile says whether st is the file e records: a regular file with
// its device and inode and, where both know one, its birth time.
func (e *spillEntry) sameFile(st *unix.Statx_t) bool {
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG || unix.Mkdev(st.Dev_major, st.Dev_minor) != e.dev || st.Ino != e.ino {
		return false
	}
	if e.born != (st.Mask&unix.STATX_BTIME != 0) {
		return false
	}
	return !e.born || st.Btime == e.btime
}

func spillGone(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return missingSpill("the spill file was removed (spills are kept for 24 hours)")
	}
	return fmt.Errorf("cannot open the spill file: %w", err)
}

// spillReader is the read tool of one run: a <spill>/NAME path reaches the
// run owner's spills and no other file.
type spillReader struct {
	tools.Tool
	open tools.SpillOpener
}

func (s spillReader) Execute(ctx context.Context, params map[string]any) (tools.Result, error) {
	return s.Tool.Execute(tools.WithSpills(ctx, s.open), params)
}
