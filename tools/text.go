package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

const (
	// sniffBytes is how much of a file decides whether it is binary.
	sniffBytes = 8 << 10
	// maxLineChars is where a displayed line is cut (read and grep).
	maxLineChars = 2000
	// maxOutputBytes bounds any one result of the file tools: a script's
	// whole run may consume only max_rpc_result_bytes (5 MiB by default),
	// so one call must not be able to eat it in one go.
	maxOutputBytes = 1 << 20
	// maxScanLineBytes is how much of one line grep matches against; the
	// rest of a pathological line (a minified bundle) is skipped.
	maxScanLineBytes = 1 << 20
	// invalidUTF8Ratio: a sample whose invalid UTF-8 bytes exceed this share
	// is treated as binary (a latin-1 text with some accents is not).
	invalidUTF8Ratio = 0.30
)

// looksBinary reports whether a sample of a file's head is binary: a NUL
// byte, or a sample dominated by bytes that are not UTF-8. A multi-byte
// sequence cut by the sample's end does not count against it.
func looksBinary(sample []byte) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if utf8.Valid(sample) {
		return false
	}
	invalid := 0
	for i := 0; i < len(sample); {
		r, size := utf8.DecodeRune(sample[i:])
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(sample[i:]) {
				break
			}
			invalid++
		}
		i += max(size, 1)
	}
	return float64(invalid) > invalidUTF8Ratio*float64(len(sample))
}

// readers recycles the 64 KiB buffers every file read needs.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// sniff peeks at the head of r without consuming it.
func sniff(br *bufio.Reader) ([]byte, error) {
	sample, err := br.Peek(sniffBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	return sample, nil
}

// lineReader yields lines of any length while keeping at most keep bytes
// of each, so a huge single-line file cannot blow up memory. Callers keep
// enough bytes that a cut line is also longer than what they display.
// Every ctxEvery bytes it checks ctx, so one endless line (a sparse file
// of gigabytes) ends at the deadline like any other read.
type lineReader struct {
	ctx  context.Context
	br   *bufio.Reader
	keep int
	buf  []byte
	// unchecked counts bytes consumed since ctx was last checked.
	unchecked int
}

// ctxEvery is how many bytes a lineReader consumes between checks of its
// context: a fraction of a millisecond of scanning.
const ctxEvery = 256 << 10

// next returns the next line without its "\n" (and without a trailing
// "\r"), and io.EOF after the last line. A final line without a newline is
// still a line. The slice is valid until the next call.
func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	sawAny := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if len(chunk) > 0 {
			sawAny = true
		}
		if lr.unchecked += len(chunk); lr.unchecked >= ctxEvery {
			lr.unchecked = 0
			if cerr := lr.ctx.Err(); cerr != nil {
				return nil, cerr
			}
		}
		if room := lr.keep - len(lr.buf); room > 0 {
			lr.buf = append(lr.buf, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == nil:
			return trimEOL(lr.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if !sawAny {
				return nil, io.EOF
			}
			return trimEOL(lr.buf), nil
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// displayLine renders a line for output: invalid UTF-8 replaced, cut at
// maxLineChars characters with a marker.
func displayLine(b []byte) string {
	var s string
	if utf8.Valid(b) {
		s = string(b)
	} else {
		s = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	if len(s) > maxLineChars && utf8.RuneCountInString(s) > maxLineChars {
		cut := 0
		for i := range s {
			if cut == maxLineChars {
				s = s[:i]
				break
			}
			cut++
		}
		s += lineCutMarker
	}
	return s
}

var lineCutMarker = fmt.Sprintf(" [... line truncated at %d chars]", maxLineChars)

// keepBytes is how many bytes of a line to keep so that maxLineChars
// characters survive even if each takes four bytes, plus one to notice
// the line goes on.
const keepBytes = maxLineChars*utf8.UTFMax + 1
