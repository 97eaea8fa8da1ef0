package kernelworker

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"
)

// The port: goroutines between one kernel's pipes and its worker actor.
// They read and write bytes and send the actor messages; they never touch
// the actor's state.

// maxChunksInFlight bounds the control-pipe chunks sent to the actor and
// not yet handled (each at most 64 KiB): a flood of output then waits in
// the pipe, where it blocks the runner, not in the mailbox.
const maxChunksInFlight = 16

// frameSink is the Output of the kernel's fd 1 (the runner's control
// descriptor). Writes wait until the actor exists (attach) and stop
// reaching it once the kernel is torn down (close).
type frameSink struct {
	ready   chan struct{}
	quit    chan struct{}
	credits chan struct{}
	once    sync.Once

	system *actor.ActorSystem
	pid    *actor.PID
}

func newFrameSink() *frameSink {
	return &frameSink{
		ready:   make(chan struct{}),
		quit:    make(chan struct{}),
		credits: make(chan struct{}, maxChunksInFlight),
	}
}

// attach names the actor; it must be called at most once, before close.
func (s *frameSink) attach(system *actor.ActorSystem, pid *actor.PID) {
	s.system, s.pid = system, pid
	close(s.ready)
}

func (s *frameSink) close() { s.once.Do(func() { close(s.quit) }) }

func (s *frameSink) Write(p []byte) (int, error) {
	select {
	case <-s.quit:
		return len(p), nil
	case <-s.ready:
	}
	select {
	case <-s.quit:
		return len(p), nil
	case s.credits <- struct{}{}:
	}
	select {
	case <-s.quit:
		// Torn down while waiting: nobody returns this credit.
		return len(p), nil
	default:
	}
	s.system.Root.Send(s.pid, &frameChunk{data: bytes.Clone(p), credits: s.credits})
	return len(p), nil
}

// release returns a chunk's credit.
func (c *frameChunk) release() {
	select {
	case <-c.credits:
	default:
	}
}

// stderrTailBytes is how much of the kernel's own stderr is kept: it only
// carries interpreter start-up errors (the runner redirects fd 2 into its
// capture early), which go to the log when a kernel fails.
const stderrTailBytes = 4096

// requestWriter writes request lines to the runner's fd 0 without ever
// blocking the actor (docs/protocol.md, Requests). A line goes straight
// into the socket when nothing is queued and the socket takes it whole,
// the usual case of a cell on an idle kernel, which saves a hand-off to
// another goroutine on every cell; whatever the socket does not take at
// once (a runner that stopped reading, a line bigger than the socket's
// buffer) is written by the writer's own goroutine, in order. A failed
// write is dropped: the cell timer and the port exit bound whatever it
// was for.
type requestWriter struct {
	f    *os.File
	raw  syscall.RawConn // nil: every line goes through the goroutine
	reqs chan []byte
	done chan struct{}
	// queued counts lines handed to the goroutine and not yet written:
	// a direct write is only taken when it is 0, so lines never overtake
	// each other.
	queued atomic.Int32
	shut   bool // actor-owned: true once close was called
}

func newRequestWriter(f *os.File) *requestWriter {
	w := &requestWriter{f: f, reqs: make(chan []byte, 4), done: make(chan struct{})}
	if raw, err := f.SyscallConn(); err == nil {
		w.raw = raw
	}
	go w.run()
	return w
}

func (w *requestWriter) run() {
	defer close(w.done)
	for line := range w.reqs {
		_, _ = w.f.Write(line)
		w.queued.Add(-1)
	}
}

// send writes or queues line without blocking; it reports false when the
// line was not taken (closed, or an impossible backlog of requests).
func (w *requestWriter) send(line []byte) bool {
	if w.shut {
		return false
	}
	if w.queued.Load() == 0 && w.raw != nil {
		line = w.writeNow(line)
		if len(line) == 0 {
			return true
		}
	}
	w.queued.Add(1)
	select {
	case w.reqs <- line:
		return true
	default:
		w.queued.Add(-1)
		return false
	}
}

// writeNow writes what the socket takes at once and returns the rest:
// nil when all of it went, line itself when nothing could be written
// now. A hard error drops the line, as the goroutine's write would.
func (w *requestWriter) writeNow(line []byte) []byte {
	var n int
	var werr error
	err := w.raw.Write(func(fd uintptr) bool {
		for n < len(line) {
			k, err := unix.Write(int(fd), line[n:])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				werr = err
				break
			}
			n += k
		}
		return true // never wait here: the goroutine waits instead
	})
	switch {
	case err != nil:
		return line
	case werr == unix.EAGAIN:
		return line[n:]
	case werr != nil:
		return nil
	}
	return line[n:]
}

// close ends the goroutine: closing the pipe fails a blocked write, and
// the runner reads EOF on its stdin.
func (w *requestWriter) close() {
	if w.shut {
		return
	}
	w.shut = true
	close(w.reqs)
	_ = w.f.Close()
	<-w.done
}
