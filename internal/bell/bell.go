package bell

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Pair is one interpreter's two doorbell pipes. The host ends are
// non-blocking and close-on-exec. The child ends are handed to the
// interpreter as fds 3 (request bell, write end) and 4 (response bell,
// read end).
type Pair struct {
	reqRead   *os.File // host: drained by the goroutine
	reqWrite  *os.File // child fd 3
	respRead  *os.File // child fd 4
	respWrite *os.File // host: Ring
	ringConn  syscall.RawConn

	drained chan struct{}

	subMu sync.Mutex
	subs  map[*Subscription]struct{}
	// unheard holds what arrived while nobody was subscribed; the next
	// subscriber starts with it pending. A server subscribes only after
	// its interpreter has started, and a request published and rung in
	// between must still be served at once.
	unheard pending

	childOnce sync.Once
	childErr  error
	closeOnce sync.Once
	closeErr  error
}

// New creates both pipes and starts draining the request bell.
func New() (*Pair, error) {
	// os.Pipe makes both ends close-on-exec and puts them in the runtime
	// poller, which sets them non-blocking; exec.Cmd makes the child's
	// copies (ExtraFiles) blocking again, and the shim sets its own.
	reqRead, reqWrite, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("request bell: %w", err)
	}
	respRead, respWrite, err := os.Pipe()
	if err != nil {
		reqRead.Close()
		reqWrite.Close()
		return nil, fmt.Errorf("response bell: %w", err)
	}
	p := &Pair{
		reqRead: reqRead, reqWrite: reqWrite,
		respRead: respRead, respWrite: respWrite,
		drained: make(chan struct{}),
		subs:    map[*Subscription]struct{}{},
	}
	if p.ringConn, err = respWrite.SyscallConn(); err != nil {
		reqRead.Close()
		reqWrite.Close()
		respRead.Close()
		respWrite.Close()
		return nil, fmt.Errorf("response bell: %w", err)
	}
	go p.drain()
	return p, nil
}

// drain turns any number of request-bell bytes into one pending wake-up
// per subscriber: each read takes everything available, and the sends
// never block, so a flood costs one wake-up per read, not one per byte.
// The names a read carries are handed to every subscriber with it. It
// ends when the bell is closed or every writer is gone.
func (p *Pair) drain() {
	defer close(p.drained)
	buf := make([]byte, 4096)
	var d Decoder
	var names []string
	for {
		n, err := p.reqRead.Read(buf)
		if n > 0 {
			names = names[:0]
			look := d.Feed(buf[:n], func(name []byte) {
				// A read of 4096 bytes holds at most 4096/2 records, so
				// this never grows past that; deliver bounds what each
				// subscriber keeps.
				names = append(names, string(name))
			})
			if look || len(names) > 0 {
				p.deliver(names, look)
			}
		}
		if err != nil {
			return
		}
	}
}

// deliver gives every subscriber the names and a pending wake-up, or
// keeps them for the next one when there is none. A ring does not say
// whose cell published, so every server of the kernel gets every name
// and looks in its own directory; one that finds nothing there has lost
// an open, nothing more.
func (p *Pair) deliver(names []string, look bool) {
	p.subMu.Lock()
	defer p.subMu.Unlock()
	if len(p.subs) == 0 {
		p.unheard.add(names, look)
		return
	}
	for s := range p.subs {
		if !s.plain {
			s.pending.add(names, look)
		}
		select {
		case s.ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// MaxPending bounds the names a subscriber holds between two Takes. Past
// it further names are dropped and the subscriber is asked to list
// instead, which finds them all: a flood of names costs one listing, and
// a subscriber that never takes holds at most this many.
const MaxPending = 128

// pending is what a subscriber has not taken yet.
type pending struct {
	names []string
	look  bool
}

func (w *pending) add(names []string, look bool) {
	w.look = w.look || look
	for _, n := range names {
		if len(w.names) >= MaxPending {
			w.look = true
			return
		}
		w.names = append(w.names, n)
	}
}

// Subscription receives the request bell's wake-ups and names from the
// moment it was made. Several session servers of one kernel (its queued
// cells) may be subscribed at once; each gets every wake-up and every
// name.
type Subscription struct {
	// C receives a wake-up whenever the bell rang since the last one was
	// received, coalesced to at most one pending. It is never closed;
	// after Cancel it stops receiving. Nil for a nil Pair: it never wakes.
	C     <-chan struct{}
	ch    chan struct{}
	p     *Pair
	plain bool // names are not kept: Subscribe's wake-only channel
	once  sync.Once
	// pending is guarded by p.subMu.
	pending pending
}

// Listen subscribes to the bell's wake-ups and names. The subscription
// starts with what arrived while nobody was subscribed pending. A nil
// Pair returns a subscription that never wakes.
func (p *Pair) Listen() *Subscription {
	return p.listen(false)
}

func (p *Pair) listen(plain bool) *Subscription {
	if p == nil {
		return &Subscription{}
	}
	ch := make(chan struct{}, 1)
	s := &Subscription{C: ch, ch: ch, p: p, plain: plain}
	p.subMu.Lock()
	if p.unheard.look || len(p.unheard.names) > 0 {
		if !plain {
			s.pending = p.unheard
		}
		p.unheard = pending{}
		ch <- struct{}{}
	}
	p.subs[s] = struct{}{}
	p.subMu.Unlock()
	return s
}

// Take returns the names delivered since the last Take, in the order they
// were rung and possibly repeated, and whether a plain ring (or more
// names than MaxPending) asked for a listing meanwhile. The names are
// untrusted: each is at most MaxName bytes of [0-9a-f+-], nothing more
// is promised.
func (s *Subscription) Take() (names []string, look bool) {
	if s.p == nil {
		return nil, false
	}
	s.p.subMu.Lock()
	defer s.p.subMu.Unlock()
	w := s.pending
	s.pending = pending{}
	return w.names, w.look
}

// Cancel ends the subscription; it is idempotent.
func (s *Subscription) Cancel() {
	if s.p == nil {
		return
	}
	s.once.Do(func() {
		s.p.subMu.Lock()
		delete(s.p.subs, s)
		s.pending = pending{}
		s.p.subMu.Unlock()
	})
}

// Subscribe returns a channel that receives every request-bell wake-up
// from now on, coalesced to at most one pending, and the function that
// ends the subscription (idempotent; the channel is never closed, it just
// stops receiving). It keeps no names: it is Listen for a caller that
// only needs to know the bell rang. A nil Pair never wakes.
func (p *Pair) Subscribe() (wake <-chan struct{}, cancel func()) {
	if p == nil {
		return nil, func() {}
	}
	s := p.listen(true)
	return s.C, s.Cancel
}

// ChildFiles returns the child's ends in fd order, for exec.Cmd.ExtraFiles:
// [request-bell write end (fd 3), response-bell read end (fd 4)].
func (p *Pair) ChildFiles() []*os.File {
	return []*os.File{p.reqWrite, p.respRead}
}

// CloseChildEnds closes the host's copies of the child's ends once the
// child has started (or failed to), so the request bell reads EOF when
// the child and everything it shared the fd with are gone.
func (p *Pair) CloseChildEnds() error {
	p.childOnce.Do(func() {
		p.childErr = errors.Join(p.reqWrite.Close(), p.respRead.Close())
	})
	return p.childErr
}

var ring = [1]byte{1}

// Ring writes one plain ring on the response bell without ever blocking:
// a full pipe already holds an unread ring, and a gone reader needs none.
// Every waiting thread of the shim looks. A nil Pair does nothing.
func (p *Pair) Ring() {
	if p == nil {
		return
	}
	p.write(ring[:])
}

// RingFor rings the response bell for the answer to call id: its decimal
// digits and a newline, which wake the shim's thread that waits for it
// (docs/protocol.md, Doorbells). It never blocks; a nil Pair does
// nothing.
func (p *Pair) RingFor(id int64) {
	if p == nil {
		return
	}
	var b [24]byte
	p.write(append(strconv.AppendInt(b[:0], id, 10), '\n'))
}

func (p *Pair) write(b []byte) {
	_ = p.ringConn.Write(func(fd uintptr) bool {
		_, _ = syscall.Write(int(fd), b)
		return true // never wait for writability
	})
}

// Close closes every end and waits for the drain goroutine to finish.
func (p *Pair) Close() error {
	if p == nil {
		return nil
	}
	p.closeOnce.Do(func() {
		p.closeErr = errors.Join(p.CloseChildEnds(), p.reqRead.Close(), p.respWrite.Close())
		<-p.drained
	})
	return p.closeErr
}
