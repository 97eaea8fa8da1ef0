package tools

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// errStopWalk ends a walk early without being an error.
var errStopWalk = errors.New("stop walk")

// walker visits a tree under an os.Root's fs.FS in lexical order. It never
// follows symlinks (they are visited as entries), checks ctx before every
// entry, and counts directories it could not read instead of failing.
type walker struct {
	fsys      fs.FS
	gitignore bool // honour .gitignore files
	hidden    bool // visit dot entries
	skipGit   bool // never enter .git
	maxDepth  int  // 0 = unlimited; 1 = the start's direct children
	// visit is called for every entry below the start; rel is relative to
	// the root, depth 1 for the start's children. Returning fs.SkipDir on
	// a directory skips its contents; errStopWalk ends the walk.
	visit func(rel string, d fs.DirEntry, depth int) error

	unreadable int
}

func (w *walker) walk(ctx context.Context, start string) error {
	var stack ignoreStack
	if w.gitignore {
		stack = stackFor(w.fsys, start)
	}
	err := w.dir(ctx, start, 1, stack)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

func (w *walker) dir(ctx context.Context, dir string, depth int, stack ignoreStack) error {
	entries, err := fs.ReadDir(w.fsys, dir)
	if err != nil {
		if depth == 1 && len(entries) == 0 {
			// The start itself: the caller reports it, not a note.
			return startError{err}
		}
		w.unreadable++
		// ReadDir can return the entries it got before failing.
		if len(entries) == 0 {
			return nil
		}
	}
	for _, d := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if !w.hidden && strings.HasPrefix(name, ".") {
			continue
		}
		if w.skipGit && name == ".git" && d.IsDir() {
			continue
		}
		rel := name
		if dir != "." {
			rel = path.Join(dir, name)
		}
		if w.gitignore && stack.ignored(rel, d.IsDir()) {
			continue
		}
		verr := w.visit(rel, d, depth)
		if errors.Is(verr, fs.SkipDir) {
			continue
		}
		if verr != nil {
			return verr
		}
		if d.IsDir() && (w.maxDepth == 0 || depth < w.maxDepth) {
			sub := stack
			if w.gitignore {
				sub = stack.push(w.fsys, rel)
			}
			if err := w.dir(ctx, rel, depth+1, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

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
