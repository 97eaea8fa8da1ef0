package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// What ignore files may cost a walk. The tool root is script-writable, so
// an ignore file is untrusted input: without bounds a planted one costs
// the host whatever its parser spends per byte (docs/decisions.md has the
// figures).
const (
	// maxIgnoreFileBytes: a larger ignore file is skipped unread.
	maxIgnoreFileBytes = 1 << 20
	// maxIgnoreCost bounds the parsed patterns one walk holds at once,
	// in estimated heap bytes: the ignore files of the directories from
	// the root down to the one being walked, with ignoreCost's estimate.
	// A file that does not fit in what is left is skipped.
	maxIgnoreCost = 2 << 20
	// patternCost and segmentCost are the measured heap of one parsed
	// pattern (its record included) and of each of its slash-separated
	// segments (TestIgnoreCostCoversTheHeap holds the estimate to the heap).
	patternCost = 96
	segmentCost = 16
	// fileCost is the record of one parsed file.
	fileCost = 128
	// maxSkipNotes is how many skipped files a result names one by one.
	maxSkipNotes = 5
)

const ignoreName = ".gitignore"

// ignoreFile is one parsed .gitignore, whose patterns apply below its
// directory.
type ignoreFile struct {
	depth    int // path segments of its directory below the root
	patterns []gitignore.Pattern
	// basename marks the patterns without a slash (but a trailing one),
	// which git matches against an entry's name alone.
	basename []bool
	cost     int
}

// ignoreStack holds the ignore files of the directories from the root
// down to the one being walked, shallowest first.
type ignoreStack []*ignoreFile

// with returns the stack with f on top. The result never shares a backing
// array slot with s, so sibling branches of a walk keep their own stacks.
func (s ignoreStack) with(f *ignoreFile) ignoreStack {
	if f == nil {
		return s
	}
	return append(s[:len(s):len(s)], f)
}

// ignored reports whether the entry whose path segments below the root
// are parts is ignored. The last matching pattern of the deepest file that
// has one decides: git's precedence, deeper files winning and a negation
// ("!keep.txt") undoing an earlier match. As in git, a pattern without a
// slash is matched against the entry's name only: its ancestors were
// matched when the walk reached them, and an ignored directory is never
// entered. Matching a long pattern list is pure CPU, so ctx is checked
// every 1,024 patterns.
func (s ignoreStack) ignored(ctx context.Context, parts []string, isDir bool) (bool, error) {
	checked := 0
	for i := len(s) - 1; i >= 0; i-- {
		f := s[i]
		if len(parts) <= f.depth {
			continue
		}
		sub, name := parts[f.depth:], parts[len(parts)-1:]
		for j := len(f.patterns) - 1; j >= 0; j-- {
			if checked++; checked%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return false, err
				}
			}
			path := sub
			if f.basename[j] {
				path = name
			}
			switch f.patterns[j].Match(path, isDir) {
			case gitignore.Exclude:
				return true, nil
			case gitignore.Include:
				return false, nil
			}
		}
	}
	return false, nil
}

// ignoreLog is a walk's account of ignore files: the cost it holds now
// and the files it skipped, for the notes of the result.
type ignoreLog struct {
	held    int
	skipped []string // "path: why", the first maxSkipNotes
	more    int      // skipped beyond those
}

func (l *ignoreLog) skip(rel, why string) {
	if len(l.skipped) == maxSkipNotes {
		l.more++
		return
	}
	l.skipped = append(l.skipped, fmt.Sprintf("[%s skipped: %s]", rel, why))
}

func (l *ignoreLog) release(s ignoreStack) {
	for _, f := range s {
		l.held -= f.cost
	}
}

func (l *ignoreLog) notes() []string {
	notes := append([]string(nil), l.skipped...)
	if l.more > 0 {
		notes = append(notes, fmt.Sprintf("[and %s skipped]", plural(l.more, "more ignore file")))
	}
	return notes
}

// errOverBudget says an ignore file's patterns do not fit what is left of
// the walk's budget.
var errOverBudget = errors.New("ignore patterns over budget")

// load reads and parses the .gitignore in dir (depth segments below the
// root), charging its cost to the log. It returns nil when there is none
// or it was skipped; a skipped file is noted with the reason. Only a
// cancelled ctx is an error: a walk does not fail over an ignore file.
func (l *ignoreLog) load(ctx context.Context, rt *os.Root, dir string, depth int) (*ignoreFile, error) {
	rel := joinRel(dir, ignoreName)
	text, why, err := readIgnore(rt, rel)
	if err != nil || why != "" {
		if why != "" {
			l.skip(rel, why)
		}
		return nil, nil
	}
	cost, n := ignoreCost(text)
	if cost > maxIgnoreCost-l.held {
		l.skip(rel, fmt.Sprintf("its patterns need about %s, more than the %s one search may hold for ignore files", sizeText(cost), sizeText(maxIgnoreCost)))
		return nil, nil
	}
	f, err := parseIgnore(ctx, text, n)
	if err != nil {
		return nil, err
	}
	l.held += cost
	f.depth, f.cost = depth, cost
	return f, nil
}

// readIgnore returns an ignore file's text, or why it is skipped. A
// missing file is neither (err fs.ErrNotExist). Only regular files up to
// maxIgnoreFileBytes are read; anything else is never opened, so a FIFO
// or a device planted as .gitignore cannot block the walk.
func readIgnore(rt *os.Root, rel string) (text, why string, err error) {
	f, fi, err := openRegular(rt, rel)
	var irr *irregularError
	switch {
	case errors.Is(err, fs.ErrNotExist) || isNotDir(err):
		return "", "", err
	case errors.As(err, &irr):
		return "", irr.Error(), nil
	case err != nil:
		return "", osReason(err), nil
	}
	defer f.Close()
	if fi.Size() > maxIgnoreFileBytes {
		return "", tooLarge(fi.Size()), nil
	}
	var b strings.Builder
	b.Grow(int(fi.Size()))
	// One byte past the cap tells a file that grew since the fstat.
	n, err := io.Copy(&b, io.LimitReader(f, maxIgnoreFileBytes+1))
	if err != nil {
		return "", osReason(err), nil
	}
	if n > maxIgnoreFileBytes {
		return "", tooLarge(n), nil
	}
	return b.String(), "", nil
}

func tooLarge(size int64) string {
	return fmt.Sprintf("%d bytes, over the %s limit for ignore files", size, sizeText(maxIgnoreFileBytes))
}

// ignoreLine is the pattern on one line of an ignore file, and whether the
// line holds one: blank lines and "#" comments do not. A trailing "\r" (a
// file written on Windows) is not part of the pattern.
func ignoreLine(line string) (string, bool) {
	line = strings.TrimSuffix(line, "\r")
	if line == "" || line[0] == '#' || strings.TrimSpace(line) == "" {
		return "", false
	}
	return line, true
}

// ignoreCost estimates the heap text's n parsed patterns hold: the text
// itself (patterns are substrings of it), the file's record, one parsed
// pattern per line with a pattern, and a slice slot per segment. It is computed before
// parsing, so a file over budget costs no parsing at all.
func ignoreCost(text string) (cost, n int) {
	cost = len(text) + fileCost
	for line := range strings.SplitSeq(text, "\n") {
		if p, ok := ignoreLine(line); ok {
			n++
			cost += patternCost + segmentCost*(strings.Count(p, "/")+1)
		}
	}
	return cost, n
}

// parseIgnore parses an ignore file's text, in file order (later patterns
// take precedence); n, from ignoreCost, sizes the result.
func parseIgnore(ctx context.Context, text string, n int) (*ignoreFile, error) {
	f := &ignoreFile{patterns: make([]gitignore.Pattern, 0, n), basename: make([]bool, 0, n)}
	i := 0
	for line := range strings.SplitSeq(text, "\n") {
		if i++; i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if p, ok := ignoreLine(line); ok {
			f.patterns = append(f.patterns, gitignore.ParsePattern(p, nil))
			f.basename = append(f.basename, matchesName(p))
		}
	}
	return f, nil
}

// matchesName reports whether a pattern has no slash but a trailing one,
// reading it as the parser does: without its "!" and trailing spaces.
func matchesName(p string) bool {
	p = strings.TrimPrefix(p, "!")
	if !strings.HasSuffix(p, "\\ ") {
		p = strings.TrimRight(p, " ")
	}
	return !strings.Contains(strings.TrimSuffix(p, "/"), "/")
}

// sizeText renders a byte count for notes: "1 MiB", "640 KiB", "12 bytes".
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return plural(n, "byte")
}
