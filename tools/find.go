package tools

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"iter"
	"slices"
)

const defaultFindMaxResults = 1000

type findTool struct{ root root }

// NewFind returns the find tool: find(pattern, path=None, type=None,
// max_depth=None, max_results=None, hidden=None).
//
// pattern is a doublestar glob matched against each entry below path
// (default: the root): without a slash against the entry's name ("*.go"
// at any depth), with one against its path relative to path
// ("cmd/**/main.go"). type "f"/"file" keeps regular files, "d"/"dir"
// directories; symlinks are listed (never followed) only without a type.
// max_depth 1 means path's direct children. Dot entries are skipped unless
// hidden=true; .git and .gitignore'd entries always are.
//
// Output is one path per line, relative to the root so it can be passed
// to read, directories with a trailing "/", sorted. At most max_results
// (default 1000) are listed, then "[results capped at N paths]" when more
// exist. Nothing found gives "No files found.".
func NewFind(opts Options) (Tool, error) {
	r, err := newRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	return &findTool{root: r}, nil
}

func (*findTool) Name() string { return Find }

type entryKind int

const (
	kindAny entryKind = iota
	kindFile
	kindDir
)

func (t *findTool) Execute(ctx context.Context, params map[string]any) (Result, error) {
	a, err := newArgs(Find, params, "pattern", "path", "type", "max_depth", "max_results", "hidden")
	if err != nil {
		return Result{}, err
	}
	pattern, err := a.requiredStr("pattern")
	if err != nil {
		return Result{}, err
	}
	glob, err := newGlob(Find, "pattern", pattern)
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
	typ, _, err := a.str("type")
	if err != nil {
		return Result{}, err
	}
	kind := kindAny
	switch typ {
	case "":
	case "f", "file":
		kind = kindFile
	case "d", "dir", "directory":
		kind = kindDir
	default:
		return Result{}, badParam(`parameter "type" of find must be "f"/"file" or "d"/"dir", got %q`, typ)
	}
	maxDepth, err := a.integer("max_depth", 0, 1)
	if err != nil {
		return Result{}, err
	}
	maxResults, err := a.integer("max_results", defaultFindMaxResults, 1)
	if err != nil {
		return Result{}, err
	}
	hidden, err := a.boolean("hidden", false)
	if err != nil {
		return Result{}, err
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
	if !fi.IsDir() {
		return Result{}, badParam("%s is not a directory; find searches below a directory", tg.shown)
	}

	start := display(tg.rel)
	var found foundPaths
	more, full := false, false
	w := &walker{
		rt:        rt,
		gitignore: true,
		hidden:    hidden,
		skipGit:   true,
		maxDepth:  maxDepth,
		visit: func(rel string, d fs.DirEntry, _ int) error {
			switch {
			case kind == kindFile && !d.Type().IsRegular():
				return nil
			case kind == kindDir && !d.IsDir():
				return nil
			}
			if !glob.match(relTo(start, rel)) {
				return nil
			}
			if found.len() == maxResults {
				more = true
				return errStopWalk
			}
			if d.IsDir() {
				rel += "/"
			}
			if found.size()+len(rel)+1 > maxOutputBytes {
				full = true
				return errStopWalk
			}
			found.add(rel)
			return nil
		},
	}
	if err := w.walk(ctx, start); err != nil {
		return Result{}, walkError(tg.shown, err)
	}
	out := newOutput()
	for f := range found.sorted() {
		out.line(f)
	}
	var notes []string
	if found.len() == 0 {
		notes = append(notes, "No files found.")
	}
	if full {
		notes = append(notes, out.fullNote())
	}
	if more {
		notes = append(notes, fmt.Sprintf("[results capped at %d paths]", maxResults))
	}
	notes = append(notes, w.notes()...)
	return TextResult(out.finish(notes...)), nil
}

// foundPaths collects find's results in one buffer with a small offset
// per path: a tree of many short names must not cost a string header and
// an allocation per result on top of the output's own bytes.
type foundPaths struct {
	buf  []byte
	ends []uint32
}

func (p *foundPaths) add(rel string) {
	p.buf = append(p.buf, rel...)
	p.ends = append(p.ends, uint32(len(p.buf)))
}

func (p *foundPaths) len() int  { return len(p.ends) }
func (p *foundPaths) size() int { return len(p.buf) + len(p.ends) }

// sorted yields the paths in byte order.
func (p *foundPaths) sorted() iter.Seq[string] {
	idx := make([]int32, len(p.ends))
	for i := range idx {
		idx[i] = int32(i)
	}
	at := func(i int32) []byte {
		start := uint32(0)
		if i > 0 {
			start = p.ends[i-1]
		}
		return p.buf[start:p.ends[i]]
	}
	slices.SortFunc(idx, func(a, b int32) int { return bytes.Compare(at(a), at(b)) })
	return func(yield func(string) bool) {
		for _, i := range idx {
			if !yield(string(at(i))) {
				return
			}
		}
	}
}
