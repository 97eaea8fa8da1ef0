package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// What the directories of a walk may cost. A script can plant a directory
// of a million entries or a tree thousands of levels deep in a few
// seconds; the walk holds the listing of every directory from its start
// down to where it is, so both are bounded (docs/decisions.md).
const (
	// maxListingCost bounds the listings one walk holds at once, in
	// estimated heap bytes (listingCost). A directory whose listing does
	// not fit in what is left is listed in part, with a note.
	maxListingCost = 4 << 20
	// maxWalkDepth is how many levels below the root a walk enters.
	maxWalkDepth = 256
	// readDirChunk is how many entries one getdents round reads.
	readDirChunk = 256
)

// errStopWalk ends a walk early without being an error.
var errStopWalk = errors.New("stop walk")

// walker visits a tree under an os.Root in lexical order. It never follows
// symlinks (they are visited as entries), never opens anything but
// directories and ignore files, checks ctx before every entry, and counts
// directories it could not read instead of failing.
type walker struct {
	rt        *os.Root
	gitignore bool // honour .gitignore files
	hidden    bool // visit dot entries
	skipGit   bool // never enter .git
	maxDepth  int  // 0 = unlimited; 1 = the start's direct children
	// visit is called for every entry below the start; rel is relative to
	// the root, depth 1 for the start's children. Returning fs.SkipDir on
	// a directory skips its contents; errStopWalk ends the walk.
	visit func(rel string, d fs.DirEntry, depth int) error

	unreadable int      // directories that could not be read
	partial    []string // directories listed in part, the first few
	morePart   int
	tooDeep    int // directories not entered, past maxWalkDepth
	held       int // listing cost held now
	ignores    ignoreLog
	// parts are the path segments below the root of the entry being
	// visited; each level of the recursion owns one slot.
	parts []string
}

func (w *walker) walk(ctx context.Context, start string) error {
	w.parts = splitRel(start)
	var stack ignoreStack
	if w.gitignore {
		var err error
		if stack, err = w.ancestors(ctx); err != nil {
			return err
		}
		defer w.ignores.release(stack)
	}
	err := w.dir(ctx, start, 1, stack)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

// ancestors loads the ignore files of every directory above the start,
// so a walk that starts in a subdirectory honours the rules its ancestors
// set. A script that names an ignored directory (path="vendor") wants it
// searched: the rules that ignore it, and those of its ancestors, are
// dropped, leaving only the ignore files at or below the ignored
// directory. The start's own file is loaded by dir.
func (w *walker) ancestors(ctx context.Context) (ignoreStack, error) {
	var s ignoreStack
	for i := range w.parts {
		f, err := w.ignores.load(ctx, w.rt, joinParts(w.parts[:i]), i)
		if err != nil {
			w.ignores.release(s)
			return nil, err
		}
		s = s.with(f)
		ignored, err := s.ignored(ctx, w.parts[:i+1], true)
		if err != nil {
			w.ignores.release(s)
			return nil, err
		}
		if ignored {
			w.ignores.release(s)
			s = nil
		}
	}
	return s, nil
}

func (w *walker) dir(ctx context.Context, dir string, depth int, stack ignoreStack) error {
	l, err := w.list(ctx, dir)
	defer func() { w.held -= l.cost }()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if depth == 1 && len(l.entries) == 0 {
			// The start itself: the caller reports it, not a note.
			return startError{err}
		}
		w.unreadable++
	}
	level := len(w.parts)
	if w.gitignore && (l.partial || l.has(ignoreName)) {
		f, err := w.ignores.load(ctx, w.rt, dir, level)
		if err != nil {
			return err
		}
		if f != nil {
			stack = stack.with(f)
			defer func() { w.ignores.held -= f.cost }()
		}
	}
	for i := range l.entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := l.entries[i]
		name := l.name(e)
		if !w.hidden && strings.HasPrefix(name, ".") {
			continue
		}
		isDir := e.typ.IsDir()
		if w.skipGit && name == ".git" && isDir {
			continue
		}
		rel := joinRel(dir, name)
		w.parts = append(w.parts[:level], name)
		if w.gitignore {
			ignored, err := stack.ignored(ctx, w.parts, isDir)
			if err != nil {
				return err
			}
			if ignored {
				continue
			}
		}
		verr := w.visit(rel, dirEntry{rt: w.rt, rel: rel, name: name, typ: e.typ}, depth)
		if errors.Is(verr, fs.SkipDir) {
			continue
		}
		if verr != nil {
			return verr
		}
		if !isDir || (w.maxDepth != 0 && depth >= w.maxDepth) {
			continue
		}
		if len(w.parts) >= maxWalkDepth {
			w.tooDeep++
			continue
		}
		if err := w.dir(ctx, rel, depth+1, stack); err != nil {
			return err
		}
	}
	w.parts = w.parts[:level]
	if l.partial {
		w.notePartial(dir, len(l.entries))
	}
	return nil
}

// listing is one directory's entries, sorted by name, held compactly: one
// string of all names and a small record per entry, so a directory costs
// little more than its names.
type listing struct {
	names   string
	entries []listEntry
	partial bool // the budget ran out before the directory did
	cost    int
}

type listEntry struct {
	off, n uint32
	typ    fs.FileMode
}

func (l *listing) name(e listEntry) string { return l.names[e.off : e.off+e.n] }

func (l *listing) has(name string) bool {
	_, found := slices.BinarySearchFunc(l.entries, name, func(e listEntry, t string) int {
		return strings.Compare(l.name(e), t)
	})
	return found
}

// listingCost is the estimated heap of a listing of n entries whose names
// total nameBytes: twice the bytes (buffers grow by doubling) of the names
// and the records.
func listingCost(n, nameBytes int) int { return 2 * (nameBytes + n*12) }

// list reads dir in chunks, charging each entry to the walk's listing
// budget; when the budget runs out the rest is not read and the listing is
// partial. dir is opened with O_DIRECTORY, so a FIFO swapped in for a
// directory fails at once instead of blocking the open. An error after
// some entries were read comes with those entries.
func (w *walker) list(ctx context.Context, dir string) (listing, error) {
	var l listing
	f, err := w.rt.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return l, err
	}
	defer f.Close()
	var names strings.Builder
	room := maxListingCost - w.held
	var rerr error
read:
	for {
		if err := ctx.Err(); err != nil {
			return l, err
		}
		chunk, err := f.ReadDir(readDirChunk)
		for _, d := range chunk {
			name := d.Name()
			if listingCost(len(l.entries)+1, names.Len()+len(name)) > room {
				l.partial = true
				break read
			}
			l.entries = append(l.entries, listEntry{off: uint32(names.Len()), n: uint32(len(name)), typ: d.Type()})
			names.WriteString(name)
		}
		if errors.Is(err, io.EOF) || len(chunk) == 0 && err == nil {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	l.names = names.String()
	slices.SortFunc(l.entries, func(a, b listEntry) int { return strings.Compare(l.name(a), l.name(b)) })
	l.cost = listingCost(len(l.entries), len(l.names))
	w.held += l.cost
	return l, rerr
}

func (w *walker) notePartial(dir string, n int) {
	if len(w.partial) == maxSkipNotes {
		w.morePart++
		return
	}
	shown := display(dir) + "/"
	if dir == "." {
		shown = "./"
	}
	w.partial = append(w.partial, fmt.Sprintf("[%s: only %d entries were read (a search holds at most %s of directory listings at once)]", shown, n, sizeText(maxListingCost)))
}

// notes are what the walk has to say about what it did not search, for
// the end of the result.
func (w *walker) notes() []string {
	notes := w.ignores.notes()
	notes = append(notes, w.partial...)
	if w.morePart > 0 {
		notes = append(notes, fmt.Sprintf("[and %s listed in part]", plural(w.morePart, "more directory")))
	}
	if w.tooDeep > 0 {
		notes = append(notes, fmt.Sprintf("[%s more than %d levels deep not entered]", plural(w.tooDeep, "directory"), maxWalkDepth))
	}
	return append(notes, unreadableNote(w.unreadable))
}

// dirEntry is a listed entry as visit sees it. Info is an lstat, made only
// when asked for (ls long=true).
type dirEntry struct {
	rt   *os.Root
	rel  string
	name string
	typ  fs.FileMode
}

func (d dirEntry) Name() string               { return d.name }
func (d dirEntry) IsDir() bool                { return d.typ.IsDir() }
func (d dirEntry) Type() fs.FileMode          { return d.typ }
func (d dirEntry) Info() (fs.FileInfo, error) { return d.rt.Lstat(d.rel) }

// startError is a failure to read the directory a walk starts in.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }
func (e startError) Unwrap() error { return e.err }

// walkError maps a walk's error for the script: cancellation as is, a
// failure at the start directory as a filesystem error on shown.
func walkError(shown string, err error) error {
	var se startError
	if errors.As(err, &se) {
		return fsError(shown, se.err)
	}
	return err
}

// unreadableNote tells the script that part of the tree was not searched.
func unreadableNote(n int) string {
	if n == 0 {
		return ""
	}
	return "[" + plural(n, "directory") + " could not be read and skipped]"
}

// splitRel is the path segments of a slash path relative to the root;
// none for the root itself.
func splitRel(rel string) []string {
	if rel == "." || rel == "" {
		return nil
	}
	return strings.Split(rel, "/")
}

func joinParts(parts []string) string {
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

// plural is "1 entry", "4 entries".
func plural(n int, noun string) string {
	return strconv.Itoa(n) + " " + pluralNoun(n, noun)
}

func pluralNoun(n int, noun string) string {
	if n == 1 {
		return noun
	}
	if strings.HasSuffix(noun, "y") {
		return strings.TrimSuffix(noun, "y") + "ies"
	}
	return noun + "s"
}
