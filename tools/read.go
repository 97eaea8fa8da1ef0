package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

const defaultReadLimit = 2000

type readTool struct{ root root }

// NewRead returns the read tool: read(path, offset=None, limit=None).
// Output is one line per file line, "%6d\t<text>" like cat -n, starting at
// offset (1-based, default 1), at most limit lines (default 2000), each cut
// at 2000 characters. When lines remain a last line says
// "[... N more lines; use offset=K to continue]". An empty file reads as
// "(empty file)".
func NewRead(opts Options) (Tool, error) {
	r, err := newRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	return &readTool{root: r}, nil
}

func (*readTool) Name() string { return Read }

func (t *readTool) Execute(ctx context.Context, params map[string]any) (Result, error) {
	a, err := newArgs(Read, params, "path", "offset", "limit")
	if err != nil {
		return Result{}, err
	}
	p, err := a.requiredStr("path")
	if err != nil {
		return Result{}, err
	}
	offset, err := a.integer("offset", 1, 1)
	if err != nil {
		return Result{}, err
	}
	limit, err := a.integer("limit", defaultReadLimit, 1)
	if err != nil {
		return Result{}, err
	}
	f, fi, shown, err := t.open(ctx, p)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	hint := int(min(fi.Size(), maxOutputBytes))
	text, err := readLines(ctx, f, shown, offset, limit, hint)
	if err != nil {
		return Result{}, err
	}
	return TextResult(text), nil
}

// open opens p, a path under the tool root or a spill placeholder
// (<spill>/NAME), as a regular file; shown is how errors name it.
func (t *readTool) open(ctx context.Context, p string) (f *os.File, fi fs.FileInfo, shown string, err error) {
	if strings.HasPrefix(p, SpillPrefix) {
		f, fi, err = openSpill(ctx, p)
		return f, fi, p, err
	}
	if f, fi, ok := t.root.openBeneath(p); ok {
		return f, fi, p, nil // relative: errors name it as written
	}
	tg, err := t.root.resolve(p)
	if err != nil {
		return nil, nil, "", err
	}
	rt, err := t.root.open()
	if err != nil {
		return nil, nil, "", err
	}
	defer rt.Close()
	f, fi, err = openShown(rt, tg.rel, tg.shown)
	return f, fi, tg.shown, err
}

// readLines renders lines offset..offset+limit-1 of r. sizeHint (the file
// size, when known) presizes the output.
func readLines(ctx context.Context, r io.Reader, shown string, offset, limit, sizeHint int) (string, error) {
	br := getReader(r)
	defer putReader(br)
	sample, err := sniff(br)
	if err != nil {
		return "", fsError(shown, err)
	}
	if looksBinary(sample) {
		return "", newError(ErrBinary, "%s is a binary file", shown)
	}
	lr := &lineReader{ctx: ctx, br: br, keep: keepBytes}
	out := newOutput()
	out.grow(sizeHint + sizeHint/4)
	n := 0 // lines consumed so far
	shownLines := 0
	for shownLines < limit {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err != nil {
			return "", fsError(shown, err)
		}
		n++
		if n < offset {
			continue
		}
		if !out.numbered(n, displayLine(line)) {
			n-- // this line was not shown
			break
		}
		shownLines++
	}
	if shownLines == 0 {
		if n == 0 && offset == 1 {
			return "(empty file)", nil
		}
		return "", badParam("offset %d is beyond the end of %s (%d lines)", offset, shown, n)
	}
	more, err := countLines(ctx, br, out.full)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return "", fsError(shown, err)
	}
	if more == 0 {
		return out.finish(), nil
	}
	note := fmt.Sprintf("[... %d more lines; use offset=%d to continue]", more, n+1)
	if out.full {
		note = out.fullNote() + "\n" + note
	}
	return out.finish(note), nil
}

// countLines counts the lines left in br, so the continuation note can say
// how many. pendingLine is true when a line has been read from br but not
// shown, and must count too.
func countLines(ctx context.Context, br *bufio.Reader, pendingLine bool) (int, error) {
	count := 0
	if pendingLine {
		count = 1
	}
	last := byte('\n')
	for i := 0; ; i++ {
		if i%16 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return 0, err
			}
		}
		chunk, _ := br.Peek(br.Buffered())
		count += bytes.Count(chunk, []byte{'\n'})
		last = chunk[len(chunk)-1]
		if _, err := br.Discard(len(chunk)); err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		count++
	}
	return count, nil
}
