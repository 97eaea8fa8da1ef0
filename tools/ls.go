package tools

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

const defaultLsMaxEntries = 500

type lsTool struct{ root root }

// NewLs returns the ls tool: ls(path=None, all=None, long=None,
// recursive=None, max_depth=None, max_entries=None).
//
// It lists path (default: the root) sorted by name, directories with a
// trailing "/", symlinks as "name -> target" with the target as written
// (never followed, also not when recursing). Dot entries appear only with
// all=true. recursive=true lists the whole tree below path, each entry as
// its path relative to path, a directory's contents right after it;
// max_depth (1 = direct children) limits the depth and implies recursive.
// .gitignore is not consulted: ls shows what is there. long=true prefixes
// each entry with mode, size in bytes and modification time (local time):
// "drwxr-xr-x       4096 2025-01-02 15:04 name/". At most max_entries
// (default 500) are listed, then a note. An empty directory gives
// "(empty directory)"; a file path lists just that file.
func NewLs(opts Options) (Tool, error) {
	r, err := newRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	return &lsTool{root: r}, nil
}

func (*lsTool) Name() string { return Ls }

func (t *lsTool) Execute(ctx context.Context, params map[string]any) (Result, error) {
	a, err := newArgs(Ls, params, "path", "all", "long", "recursive", "max_depth", "max_entries")
	if err != nil {
		return Result{}, err
	}
	p, hasPath, err := a.str("path")
	if err != nil {
		return Result{}, err
	}
	if !hasPath || p == "" {
		p = "."
	}
	all, err := a.boolean("all", false)
	if err != nil {
		return Result{}, err
	}
	long, err := a.boolean("long", false)
	if err != nil {
		return Result{}, err
	}
	recursive, err := a.boolean("recursive", false)
	if err != nil {
		return Result{}, err
	}
	maxDepth, err := a.integer("max_depth", 0, 1)
	if err != nil {
		return Result{}, err
	}
	maxEntries, err := a.integer("max_entries", defaultLsMaxEntries, 1)
	if err != nil {
		return Result{}, err
	}
	if !recursive && maxDepth == 0 {
		maxDepth = 1
	}

	tg, err := t.root.resolve(p)
	if err != nil {
		return Result{}, err
	}
	rt, err := t.root.open()
	if err != nil {
		return Result{}, err
	}
	defer rt.Close()
	fi, err := rt.Stat(tg.rel)
	if err != nil {
		return Result{}, fsError(tg.shown, err)
	}
	out := newOutput()
	if !fi.IsDir() {
		out.line(formatEntry(tg.shown, fi, long, ""))
		return TextResult(out.finish()), nil
	}

	start := display(tg.rel)
	listed, notShown := 0, 0
	w := &walker{
		rt:       rt,
		hidden:   all,
		maxDepth: maxDepth,
		visit: func(rel string, d fs.DirEntry, _ int) error {
			if listed == maxEntries || out.full {
				notShown++
				if maxDepth != 1 {
					// Counting the rest of a tree could mean walking
					// all of it; one more entry proves there are more.
					return errStopWalk
				}
				return nil
			}
			name := relTo(start, rel)
			if d.IsDir() {
				name += "/"
			}
			link := ""
			if d.Type()&fs.ModeSymlink != 0 {
				link = readLink(rt, rel)
			}
			var info fs.FileInfo
			if long {
				var err error
				if info, err = d.Info(); err != nil {
					info = nil
				}
			}
			if out.line(formatEntry(name, info, long, link)) {
				listed++
			} else {
				notShown++
			}
			return nil
		},
	}
	if err := w.walk(ctx, start); err != nil {
		return Result{}, walkError(tg.shown, err)
	}
	var notes []string
	if listed == 0 && notShown == 0 {
		notes = append(notes, "(empty directory)")
	}
	if out.full {
		notes = append(notes, out.fullNote())
	}
	if notShown > 0 {
		if maxDepth == 1 {
			notes = append(notes, fmt.Sprintf("[... %d more %s not shown; raise max_entries to see them]", notShown, pluralNoun(notShown, "entry")))
		} else {
			notes = append(notes, fmt.Sprintf("[listing capped at %d entries]", listed))
		}
	}
	notes = append(notes, w.notes()...)
	return TextResult(out.finish(notes...)), nil
}

func readLink(rt *os.Root, rel string) string {
	target, err := rt.Readlink(rel)
	if err != nil {
		return "?"
	}
	return target
}

// formatEntry renders one entry. info may be nil when long is false (or
// when the entry vanished mid-listing, which prints "?" columns).
func formatEntry(name string, info fs.FileInfo, long bool, link string) string {
	if link != "" {
		name += " -> " + link
	}
	if !long {
		return name
	}
	if info == nil {
		return fmt.Sprintf("%-10s %10s %16s %s", "?", "?", "?", name)
	}
	return fmt.Sprintf("%s %10d %s %s", modeString(info.Mode()), info.Size(),
		info.ModTime().Format("2006-01-02 15:04"), name)
}

// modeString is ls -l's mode column: type letter, then permission bits.
func modeString(m fs.FileMode) string {
	kind := byte('-')
	switch {
	case m.IsDir():
		kind = 'd'
	case m&fs.ModeSymlink != 0:
		kind = 'l'
	case m&fs.ModeNamedPipe != 0:
		kind = 'p'
	case m&fs.ModeSocket != 0:
		kind = 's'
	case m&fs.ModeCharDevice != 0:
		kind = 'c'
	case m&fs.ModeDevice != 0:
		kind = 'b'
	}
	return string(kind) + strings.TrimPrefix(m.Perm().String(), "-")
}
