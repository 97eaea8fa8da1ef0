package kernelworker

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"unicode/utf8"
)

// headPercent is the share of max_output_bytes kept from the start of the
// output once it overflows; the rest of the budget is the rolling tail
// (design ruling 2).
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
	// SpillPath names the file holding the complete sanitized output; it
	// is empty unless Spilled.
	SpillPath string
	// TotalBytes counts every sanitized byte written, kept or not.
	TotalBytes int64
	// Spilled is true when SpillPath holds the complete output.
	Spilled bool
}

// Capture is an io.Writer that keeps a bounded, sanitized copy of a child's
// output: everything while it fits maxBytes, then the first 40 % and a
// rolling last 60 %, while a spill file receives all of it. Its memory is
// O(maxBytes) however much is written. It is safe for concurrent use.
type Capture struct {
	mu        sync.Mutex
	max       int
	headCap   int
	openSpill func() (*os.File, error)

	san     sanitizer
	scratch []byte
	total   int64

	buf        []byte // everything, while total <= max
	overflowed bool
	head       []byte
	tail       ring

	spill     *os.File
	spillPath string
	spillOK   bool
	finished  bool
	closed    bool
}

// NewCapture returns a Capture keeping at most maxBytes of text (plus the
// truncation marker). openSpill is called once, at the first overflow; it
// may be nil, and if it fails the output is still truncated, only without
// a spill file.
func NewCapture(maxBytes int, openSpill func() (*os.File, error)) *Capture {
	maxBytes = max(maxBytes, 0)
	headCap := int(int64(maxBytes) * headPercent / 100)
	return &Capture{max: maxBytes, headCap: headCap, openSpill: openSpill}
}

// Write sanitizes p and records it. It never fails: a child must never
// block on its output because a spill file went bad. Once Result or Close
// has ended the stream, further writes are discarded.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return len(p), nil
	}
	for rest := p; len(rest) > 0; {
		n := min(len(rest), sanitizeChunk)
		c.scratch = c.san.append(c.scratch[:0], rest[:n])
		c.add(c.scratch)
		rest = rest[n:]
	}
	return len(p), nil
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
	if c.spill == nil || !c.spillOK || len(p) == 0 {
		return
	}
	if _, err := c.spill.Write(p); err != nil {
		// A partial spill file must not be advertised as the full output.
		c.dropSpill()
	}
}

func (c *Capture) dropSpill() {
	c.spillOK = false
	if c.spill != nil {
		_ = c.spill.Close()
		_ = os.Remove(c.spillPath)
		c.spill = nil
	}
}

// Break ends a segment without ending the stream: whatever the sanitizer
// holds back (a partial character or escape sequence) is resolved now,
// because the bytes that follow come from another source, such as the
// other of a kernel's two streams, and cannot complete it.
func (c *Capture) Break() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return
	}
	c.scratch = c.san.flush(c.scratch[:0])
	c.add(c.scratch)
}

// finish resolves whatever the sanitizer still holds back; the stream is
// over once a result is asked for.
func (c *Capture) finish() {
	if c.finished {
		return
	}
	c.finished = true
	c.scratch = c.san.flush(c.scratch[:0])
	c.add(c.scratch)
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
