package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unicode/utf8"
)

// headPercent is the share of max_output_bytes kept from the start of the
// output once it overflows; the rest of the budget is the rolling tail
// (README.md, The result).
const headPercent = 40

// sanitizeChunk bounds how much input is sanitized in one go, so a single
// huge Write does not need a scratch buffer of its own size.
const sanitizeChunk = 64 << 10

// Output is what a Capture kept of a child's merged stdout and stderr.
type Output struct {
	// Text is the sanitized output, or, when it did not fit, its head, the
	// marker "\n... [N bytes truncated] ...\n" and its tail.
	Text string
	// Truncated is true whenever anything was cut from Text.
	Truncated bool
	// SpillPath names the file holding the sanitized, scrubbed output; it
	// is empty unless Spilled.
	SpillPath string
	// TotalBytes counts every sanitized, scrubbed byte written, kept or
	// not.
	TotalBytes int64
	// Spilled is true when SpillPath holds the output: all of it, or, when
	// SpillCut, its first SpillBytes bytes.
	Spilled bool
	// SpillBytes is the size of the spill file.
	SpillBytes int64
	// SpillCut is true when the spill reached its cap (or the host's own
	// file size limit) and holds only the start of the output.
	SpillCut bool
}

// Capture is an io.Writer that keeps a bounded, sanitized and scrubbed
// copy of a child's output: everything while it fits maxBytes, then the
// first 40 % and a rolling last 60 %, while a spill file receives all of
// it, up to its cap. The stream is sanitized, then scrubbed, and only then
// cut or spilled, so neither the kept text nor the spill ever holds part
// of a scrubbed pattern. Its memory is O(maxBytes) however much is
// written. It is safe for concurrent use.
type Capture struct {
	mu         sync.Mutex
	max        int
	headCap    int
	openSpill  func() (*os.File, error)
	spillLimit int64

	// san and scrub hold back a partial character or escape sequence and
	// a possible start of a pattern, so a character or a path split
	// between two writes is joined again.
	san      sanitizer
	scrub    scrubStream
	scratch  []byte
	scrubbed []byte
	total    int64

	buf        []byte // everything, while total <= max
	overflowed bool
	head       []byte
	tail       ring

	spill      *os.File
	spillPath  string
	spillOK    bool
	spillBytes int64
	spillCut   bool
	finished   bool
	closed     bool
}

// CaptureOption configures a Capture.
type CaptureOption func(*Capture)

// ScrubWith scrubs the stream with s (nil: nothing is replaced).
func ScrubWith(s *Scrubber) CaptureOption {
	return func(c *Capture) { c.scrub.s = s }
}

// SpillLimit caps the spill file at n bytes; 0 means no cap.
func SpillLimit(n int64) CaptureOption {
	return func(c *Capture) { c.spillLimit = max(n, 0) }
}

// NewCapture returns a Capture keeping at most maxBytes of text (plus the
// truncation marker). openSpill is called once, at the first overflow; it
// may be nil, and if it fails the output is still truncated, only without
// a spill file.
func NewCapture(maxBytes int, openSpill func() (*os.File, error), opts ...CaptureOption) *Capture {
	maxBytes = max(maxBytes, 0)
	headCap := int(int64(maxBytes) * headPercent / 100)
	c := &Capture{max: maxBytes, headCap: headCap, openSpill: openSpill}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Write sanitizes p and records it as the continuation of everything
// written so far. It never fails: a child must never block on its output
// because a spill file went bad. Once Result or Close has ended the
// stream, further writes are discarded.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return len(p), nil
	}
	for rest := p; len(rest) > 0; {
		n := min(len(rest), sanitizeChunk)
		c.scratch = c.san.append(c.scratch[:0], rest[:n])
		c.emit(c.scratch)
		rest = rest[n:]
	}
	return len(p), nil
}

// emit passes sanitized bytes through the scrubber to what is kept.
func (c *Capture) emit(s []byte) {
	if c.scrub.s == nil {
		c.add(s)
		return
	}
	c.scrubbed = c.scrub.append(c.scrubbed[:0], s)
	c.add(c.scrubbed)
}

func (c *Capture) add(s []byte) {
	if len(s) == 0 {
		return
	}
	c.total += int64(len(s))
	if c.overflowed {
		c.writeSpill(s)
		c.tail.write(s)
		return
	}
	if len(c.buf)+len(s) <= c.max {
		c.buf = append(c.buf, s...)
		return
	}
	c.overflow(s)
}

// overflow runs once, when buf+s first exceeds max: buf+s is split into a
// head cut back to a rune boundary and a tail ring, and the spill file
// starts with everything seen so far.
func (c *Capture) overflow(s []byte) {
	c.overflowed = true
	if c.openSpill != nil {
		f, err := c.openSpill()
		switch {
		case err == nil && f != nil:
			c.spill, c.spillPath, c.spillOK = f, f.Name(), true
		case f != nil:
			_ = f.Close()
		}
	}
	c.writeSpill(c.buf)
	c.writeSpill(s)

	at := func(i int) byte {
		if i < len(c.buf) {
			return c.buf[i]
		}
		return s[i-len(c.buf)]
	}
	// len(buf)+len(s) > max >= headCap, so at(h) exists: cutting before a
	// rune start keeps the head valid UTF-8.
	h := c.headCap
	for h > 0 && !utf8.RuneStart(at(h)) {
		h--
	}
	head := make([]byte, 0, h)
	head = append(head, c.buf[:min(h, len(c.buf))]...)
	if h > len(c.buf) {
		head = append(head, s[:h-len(c.buf)]...)
	}
	c.head = head

	c.tail.b = make([]byte, c.max-c.headCap)
	c.tail.write(c.buf)
	c.tail.write(s)
	c.buf = nil
}

func (c *Capture) writeSpill(p []byte) {
	if c.spill == nil || !c.spillOK || c.spillCut || len(p) == 0 {
		return
	}
	if c.spillLimit > 0 && int64(len(p)) > c.spillLimit-c.spillBytes {
		c.spillCut = true
		p = p[:runeCut(p, int(c.spillLimit-c.spillBytes))]
	}
	n, err := c.spill.Write(p)
	c.spillBytes += int64(n)
	switch {
	case err == nil:
	case errors.Is(err, syscall.EFBIG):
		// The host runs under a file size limit of its own (Go ignores
		// SIGXFSZ, so the write fails instead of killing it): that limit
		// is the spill's cap, cut back to a character boundary.
		c.spillCut = true
		if k := runeCut(p, n); k < n {
			if c.spill.Truncate(c.spillBytes-int64(n-k)) != nil {
				c.dropSpill()
				return
			}
			c.spillBytes -= int64(n - k)
		}
	default:
		// A spill that silently lost bytes must not be advertised.
		c.dropSpill()
	}
}

// runeCut returns the largest k <= n at which p can be cut without
// splitting a UTF-8 sequence.
func runeCut(p []byte, n int) int {
	if n >= len(p) {
		return len(p)
	}
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return n
}

func (c *Capture) dropSpill() {
	c.spillOK = false
	if c.spill != nil {
		_ = c.spill.Close()
		_ = os.Remove(c.spillPath)
		c.spill = nil
	}
}

// finish resolves whatever is still held back; the stream is over once a
// result is asked for.
func (c *Capture) finish() {
	if c.finished {
		return
	}
	c.finished = true
	c.scratch = c.san.flush(c.scratch[:0])
	c.emit(c.scratch)
	if c.scrub.s != nil {
		c.scrubbed = c.scrub.flush(c.scrubbed[:0])
		c.add(c.scrubbed)
	}
}

// Result ends the stream and returns what was kept. It may be called more
// than once.
func (c *Capture) Result() Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finish()
	out := Output{TotalBytes: c.total}
	if c.spillOK {
		out.Spilled, out.SpillPath = true, c.spillPath
		out.SpillBytes, out.SpillCut = c.spillBytes, c.spillCut
	}
	if !c.overflowed {
		out.Text = string(c.buf)
		return out
	}
	tail := c.tail.bytes()
	for k := 0; k < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); k++ {
		tail = tail[1:]
	}
	dropped := c.total - int64(len(c.head)) - int64(len(tail))
	out.Truncated = true
	out.Text = string(c.head) + truncationMarker(dropped) + string(tail)
	return out
}

func truncationMarker(n int64) string {
	return "\n... [" + strconv.FormatInt(n, 10) + " bytes truncated] ...\n"
}

// Close ends the stream and closes the spill file, which stays on disk for
// the model to read (its reaper belongs to privatetmp). Close is
// idempotent.
func (c *Capture) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.finish()
	c.closed = true
	if c.spill == nil {
		return nil
	}
	err := c.spill.Close()
	c.spill = nil
	if err != nil {
		c.spillOK = false
		_ = os.Remove(c.spillPath)
		return fmt.Errorf("close spill file: %w", err)
	}
	return nil
}

// ring keeps the last len(b) bytes written to it.
type ring struct {
	b    []byte
	w    int
	full bool
}

func (r *ring) write(p []byte) {
	n := len(r.b)
	if n == 0 || len(p) == 0 {
		return
	}
	if len(p) >= n {
		copy(r.b, p[len(p)-n:])
		r.w, r.full = 0, true
		return
	}
	k := copy(r.b[r.w:], p)
	copy(r.b, p[k:])
	r.w += len(p)
	if r.w >= n {
		r.w -= n
		r.full = true
	}
}

func (r *ring) bytes() []byte {
	if !r.full {
		return r.b[:r.w]
	}
	out := make([]byte, 0, len(r.b))
	out = append(out, r.b[r.w:]...)
	return append(out, r.b[:r.w]...)
}

// TailBuffer keeps the last bytes written to it, for a process's stderr
// whose tail goes to the log when the process fails. It is safe for
// concurrent use.
type TailBuffer struct {
	mu sync.Mutex
	r  ring
}

// NewTailBuffer keeps the last n bytes.
func NewTailBuffer(n int) *TailBuffer {
	return &TailBuffer{r: ring{b: make([]byte, n)}}
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.write(p)
	return len(p), nil
}

func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.r.bytes())
}
