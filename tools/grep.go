package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"strconv"
)

const defaultGrepMaxResults = 100

type grepTool struct{ root root }

// NewGrep returns the grep tool: grep(pattern, path=None, glob=None,
// case_sensitive=None, literal=None, context_lines=None, max_results=None).
//
// pattern is a Go (RE2) regular expression, or a plain string with
// literal=true; matching is case-sensitive unless case_sensitive=false.
// path (default: the root) may be a directory, searched recursively, or a
// file. The walk honours .gitignore files (those of the root and of every
// directory down to path included), skips .git directories, does not
// follow symlinks, and skips binary files (a binary file named as path is
// an error). Other dot files are searched. glob filters files: without a
// slash it matches the file name, with one the path relative to path.
//
// Output is "relpath:line:text" per matching line, relpath relative to the
// root so it can be passed to read; with context_lines, context lines are
// "relpath-line-text" and non-adjacent groups are separated by "--", like
// grep. At most max_results matches (default 100) are shown, then
// "[results capped at N matches]" when more exist. No match at all gives
// "No matches found.".
func NewGrep(opts Options) (Tool, error) {
	r, err := newRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	return &grepTool{root: r}, nil
}

func (*grepTool) Name() string { return Grep }

func (t *grepTool) Execute(ctx context.Context, params map[string]any) (Result, error) {
	a, err := newArgs(Grep, params, "pattern", "path", "glob", "case_sensitive", "literal", "context_lines", "max_results")
	if err != nil {
		return Result{}, err
	}
	pattern, err := a.requiredStr("pattern")
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
	globText, hasGlob, err := a.str("glob")
	if err != nil {
		return Result{}, err
	}
	caseSensitive, err := a.boolean("case_sensitive", true)
	if err != nil {
		return Result{}, err
	}
	literal, err := a.boolean("literal", false)
	if err != nil {
		return Result{}, err
	}
	contextLines, err := a.integer("context_lines", 0, 0)
	if err != nil {
		return Result{}, err
	}
	maxResults, err := a.integer("max_results", defaultGrepMaxResults, 1)
	if err != nil {
		return Result{}, err
	}
	expr := pattern
	if literal {
		expr = regexp.QuoteMeta(expr)
	}
	if !caseSensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Result{}, badParam("invalid pattern %q: %s", pattern, regexpReason(err))
	}
	var glob *globMatcher
	if hasGlob && globText != "" {
		g, err := newGlob(Grep, "glob", globText)
		if err != nil {
			return Result{}, err
		}
		glob = &g
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

	s := &grepSearch{
		re:           re,
		rt:           rt,
		contextLines: contextLines,
		max:          maxResults,
		out:          newOutput(),
	}
	s.lines.ctx, s.lines.keep = ctx, maxScanLineBytes
	start := display(tg.rel)
	if !fi.IsDir() {
		if glob == nil || glob.match(path.Base(start)) {
			if err := s.file(ctx, start, tg.shown, true); err != nil && !errors.Is(err, errStopWalk) {
				return Result{}, err
			}
		}
		return TextResult(s.finish(nil)), nil
	}
	w := &walker{
		rt:        rt,
		gitignore: true,
		hidden:    true,
		skipGit:   true,
		visit: func(rel string, d fs.DirEntry, _ int) error {
			// FIFOs, sockets and devices are never opened.
			if !d.Type().IsRegular() {
				return nil
			}
			if glob != nil && !glob.match(relTo(start, rel)) {
				return nil
			}
			return s.file(ctx, rel, rel, false)
		},
	}
	if err := w.walk(ctx, start); err != nil {
		return Result{}, walkError(tg.shown, err)
	}
	return TextResult(s.finish(w.notes())), nil
}

// regexpReason is the part of a regexp error after "error parsing regexp: ".
func regexpReason(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return se.Code.String() + ": `" + se.Expr + "`"
	}
	return err.Error()
}

type grepSearch struct {
	re           *regexp.Regexp
	rt           *os.Root
	contextLines int
	max          int
	out          *output
	lines        lineReader // reused by every file, with its buffer

	matches    int
	more       bool // a match beyond max exists
	lastFile   string
	lastLine   int
	printedAny bool
	skipped    int // files that could not be read

	// before holds the context lines ahead of the next match, at most
	// contextLines of them and at most maxOutputBytes of text: more could
	// never be shown, so a huge context_lines cannot hold a file in memory.
	before      []heldLine
	beforeBytes int
}

type heldLine struct {
	n    int
	text string
}

// heldLineCost is a held line's bytes beyond its text.
const heldLineCost = 32

// file searches one file. explicit is true when the script named the file
// as path: then failures are errors instead of silent skips.
func (s *grepSearch) file(ctx context.Context, rel, shown string, explicit bool) error {
	var f *os.File
	var err error
	if explicit {
		f, _, err = openShown(s.rt, rel, shown)
	} else {
		f, _, err = openChecked(s.rt, rel)
	}
	if err != nil {
		var irr *irregularError
		switch {
		case explicit:
			return err
		case !errors.As(err, &irr):
			// A file swapped for a FIFO or a device since the listing
			// is not a file to search; one that cannot be read is noted.
			s.skipped++
		}
		return nil
	}
	defer f.Close()
	br := getReader(f)
	defer putReader(br)
	sample, err := sniff(br)
	if err != nil {
		if explicit {
			return fsError(shown, err)
		}
		s.skipped++
		return nil
	}
	if looksBinary(sample) {
		if explicit {
			return newError(ErrBinary, "%s is a binary file", shown)
		}
		return nil
	}
	s.lines.br = br
	defer func() { s.lines.br = nil }()
	s.dropHeld()
	afterLeft := 0
	for n := 1; ; n++ {
		line, err := s.lines.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if explicit {
				return fsError(shown, err)
			}
			s.skipped++
			return nil
		}
		switch {
		case s.re.Match(line):
			if s.matches >= s.max {
				s.more = true
				return errStopWalk
			}
			s.matches++
			for _, h := range s.before {
				s.emit(rel, h.n, '-', h.text)
			}
			s.dropHeld()
			s.emit(rel, n, ':', displayLine(line))
			afterLeft = s.contextLines
		case afterLeft > 0:
			s.emit(rel, n, '-', displayLine(line))
			afterLeft--
		case s.contextLines > 0:
			s.hold(heldLine{n: n, text: displayLine(line)})
		}
		if s.out.full {
			return errStopWalk
		}
	}
}

// hold keeps a context line, dropping the oldest beyond the bounds.
func (s *grepSearch) hold(h heldLine) {
	s.before = append(s.before, h)
	s.beforeBytes += len(h.text) + heldLineCost
	for len(s.before) > s.contextLines || s.beforeBytes > maxOutputBytes {
		s.beforeBytes -= len(s.before[0].text) + heldLineCost
		s.before[0] = heldLine{}
		s.before = s.before[1:]
	}
}

func (s *grepSearch) dropHeld() {
	clear(s.before)
	s.before, s.beforeBytes = s.before[:0], 0
}

func (s *grepSearch) emit(rel string, n int, sep byte, text string) {
	if s.contextLines > 0 && s.printedAny && (rel != s.lastFile || n != s.lastLine+1) {
		s.out.line("--")
	}
	s.out.line(rel + string(sep) + strconv.Itoa(n) + string(sep) + text)
	s.lastFile, s.lastLine, s.printedAny = rel, n, true
}

func (s *grepSearch) finish(walkNotes []string) string {
	var notes []string
	if s.out.full {
		notes = append(notes, s.out.fullNote())
	}
	if s.more {
		notes = append(notes, fmt.Sprintf("[results capped at %d matches]", s.max))
	}
	if s.skipped > 0 {
		notes = append(notes, "["+plural(s.skipped, "file")+" could not be read and skipped]")
	}
	notes = append(notes, walkNotes...)
	if s.matches == 0 {
		return s.out.finish(append([]string{"No matches found."}, notes...)...)
	}
	return s.out.finish(notes...)
}
