package bell

import (
	"errors"
	"fmt"
	"os"
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
	subs  map[chan struct{}]struct{}
	// unheard says a ring arrived while nobody was subscribed; the next
	// subscriber starts with it pending. A server subscribes only after
	// its interpreter has started, and a request published and rung in
	// between must still be swept at once.
	unheard bool

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
		subs:    map[chan struct{}]struct{}{},
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
// It ends when the bell is closed or every writer is gone.
func (p *Pair) drain() {
	defer close(p.drained)
	buf := make([]byte, 4096)
	for {
		n, err := p.reqRead.Read(buf)
		if n > 0 {
			p.broadcast()
		}
		if err != nil {
			return
		}
	}
}

// broadcast gives every subscriber a pending wake-up, or keeps the ring
// for the next one when there is none. A ring does not say whose cell
// published, so every server of the kernel looks at its own directory;
// one that finds nothing has lost a listing, nothing more.
func (p *Pair) broadcast() {
	p.subMu.Lock()
	defer p.subMu.Unlock()
	if len(p.subs) == 0 {
		p.unheard = true
		return
	}
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Subscribe returns a channel that receives every request-bell wake-up
// from now on, coalesced to at most one pending, and the function that
// ends the subscription (idempotent; the channel is never closed, it just
// stops receiving). The channel starts with a wake-up pending when a ring
// arrived while nobody was subscribed. Several session servers of one
// kernel (its queued cells) may be subscribed at once. A nil Pair never
// wakes.
func (p *Pair) Subscribe() (wake <-chan struct{}, cancel func()) {
	if p == nil {
		return nil, func() {}
	}
	ch := make(chan struct{}, 1)
	p.subMu.Lock()
	p.subs[ch] = struct{}{}
	if p.unheard {
		p.unheard = false
		ch <- struct{}{}
	}
	p.subMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			p.subMu.Lock()
			delete(p.subs, ch)
			p.subMu.Unlock()
		})
	}
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

// Ring writes one byte on the response bell without ever blocking: a full
// pipe already holds an unread ring, and a gone reader needs none. A nil
// Pair does nothing.
func (p *Pair) Ring() {
	if p == nil {
		return
	}
	_ = p.ringConn.Write(func(fd uintptr) bool {
		_, _ = syscall.Write(int(fd), ring[:])
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
