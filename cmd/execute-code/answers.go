package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	executecode "github.com/executecode/executecode"
)

// The answers serve writes, one JSON object a line. Their fields are
// declared in the order of their JSON names, so that each line is byte
// for byte what encoding a map of the same keys gives (encoding/json
// sorts map keys). ID is the request's id as it came in, or null.
type (
	errorLine struct {
		Error string          `json:"error"`
		ID    json.RawMessage `json:"id"`
	}
	okLine struct {
		ID json.RawMessage `json:"id"`
		OK bool            `json:"ok"`
	}
	notifyLine struct {
		ID     json.RawMessage `json:"id"`
		Notify string          `json:"notify"`
	}
	resultLine struct {
		ID     json.RawMessage    `json:"id"`
		Result executecode.Result `json:"result"`
	}
	snapshotLine struct {
		ID       json.RawMessage      `json:"id"`
		Snapshot executecode.Snapshot `json:"snapshot"`
	}
)

func errorAnswer(id json.RawMessage, msg string) errorLine {
	return errorLine{Error: msg, ID: idValue(id)}
}

// idValue is the id an answer echoes: nil (null) when the request had
// none.
func idValue(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	return id
}

// lineWriter writes whole JSON lines from many goroutines, coalescing
// them under load. A line joins pending, and the goroutine that finds no
// write in progress writes everything pending, again and again until
// nothing is; one that finds a write in progress leaves its line to that
// write's goroutine. So no line waits while stdout is idle, and lines that
// come during a write go out together in the next one. The first failed
// write (the client went away) calls broken once and drops every later
// line.
type lineWriter struct {
	mu      sync.Mutex
	room    sync.Cond // broadcast as pending drains
	w       io.Writer
	broken  func()
	failed  bool
	writing bool
	pending []byte
	spare   []byte
}

// pendingBound is how much may wait behind a write before senders wait
// for it, so that a client that stops reading holds up the cells as it
// did when every line was written in turn, and not the server's memory.
const pendingBound = 1 << 20

// keptBuffer bounds a buffer kept for reuse: one grown by a large result
// is let go.
const keptBuffer = 64 << 10

func newLineWriter(w io.Writer, broken func()) *lineWriter {
	l := &lineWriter{w: w, broken: broken}
	l.room.L = &l.mu
	return l
}

// send writes v as one line now, or with the write in progress.
func (l *lineWriter) send(v any) { l.put(v, true) }

// queue adds v as one line without writing it: the serve loop queues what
// its decoder answers while more input is at hand, and flushes before it
// waits for input or hands a request on. Any send writes it too.
func (l *lineWriter) queue(v any) { l.put(v, false) }

// flush writes whatever is queued, unless a write in progress will.
func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drainLocked()
}

func (l *lineWriter) put(v any, now bool) {
	e := encoders.Get().(*lineEncoder)
	defer e.release()
	line := e.encode(v)
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writing && len(l.pending) >= pendingBound && !l.failed {
		l.room.Wait()
	}
	if l.failed {
		return
	}
	l.pending = append(l.pending, line...)
	if now || len(l.pending) >= pendingBound {
		l.drainLocked()
	}
}

// drainLocked writes pending until nothing is, unless another goroutine
// is writing already (it will). The lock is released during each write.
func (l *lineWriter) drainLocked() {
	if l.writing {
		return
	}
	l.writing = true
	for len(l.pending) > 0 && !l.failed {
		buf := l.pending
		l.pending = l.spare[:0]
		l.mu.Unlock()
		_, err := l.w.Write(buf)
		l.mu.Lock()
		l.spare = nil
		if cap(buf) <= keptBuffer {
			l.spare = buf[:0]
		}
		if err != nil {
			l.failed, l.pending = true, nil
			if l.broken != nil {
				l.broken()
			}
		}
		l.room.Broadcast()
	}
	l.writing = false
}

// lineEncoder is a reusable buffer and the encoder writing into it.
type lineEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &lineEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// encode returns v as one JSON line, valid until the encoder is released;
// a value that cannot be encoded becomes an error line.
func (e *lineEncoder) encode(v any) []byte {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		e.buf.Reset()
		fmt.Fprintf(&e.buf, "{\"error\":%q}\n", "cannot encode answer: "+err.Error())
	}
	return e.buf.Bytes()
}

func (e *lineEncoder) release() {
	if e.buf.Cap() <= keptBuffer {
		encoders.Put(e)
	}
}
