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
// once the spill's result names it; until then nobody may read it.
type spillEntry struct {
	dir, name string
	dev, ino  uint64
	owner     *spillOwner
}

// spillBook records the runtime's spills by file name.
type spillBook struct {
	byName map[string]*spillEntry
	order  []string
}

// recordSpill notes a spill file the runtime just created.
func (r *Runtime) recordSpill(f *os.File) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return // unrecorded: never readable by placeholder
	}
	e := &spillEntry{dir: filepath.Dir(f.Name()), name: filepath.Base(f.Name()), dev: uint64(st.Dev), ino: st.Ino}
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
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, spillGone(err)
	}
	if uint64(st.Dev) != entry.dev || st.Ino != entry.ino {
		unix.Close(fd)
		return nil, errors.New("refused: the spill file was replaced")
	}
	return os.NewFile(uintptr(fd), name), nil
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
