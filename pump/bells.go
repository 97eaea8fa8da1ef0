package pump

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Bells are a run's two doorbell pipes (docs/protocol.md, Doorbells): the
// request bell, which the shim rings after publishing a frame, and the
// response bell, which the pump rings after publishing a response. A ring
// carries no data and no authority; it only says "look at the directory".
//
// The host ends are non-blocking and close-on-exec. The child ends are
// handed to the interpreter as fds 3 (request bell, write end) and 4
// (response bell, read end).
type Bells struct {
	reqRead   *os.File // host: drained by the goroutine
	reqWrite  *os.File // child fd 3
	respRead  *os.File // child fd 4
	respWrite *os.File // host: Ring
	ringConn  syscall.RawConn

	// wake is the subscription made at NewBells, which Wake returns.
	wake    chan struct{}
	drained chan struct{}

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}

	childOnce sync.Once
	childErr  error
	closeOnce sync.Once
	closeErr  error
}

// NewBells creates both pipes and starts draining the request bell.
func NewBells() (*Bells, error) {
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
	b := &Bells{
		reqRead: reqRead, reqWrite: reqWrite,
		respRead: respRead, respWrite: respWrite,
		wake:    make(chan struct{}, 1),
		drained: make(chan struct{}),
	}
	b.subs = map[chan struct{}]struct{}{b.wake: {}}
	if b.ringConn, err = respWrite.SyscallConn(); err != nil {
		reqRead.Close()
		reqWrite.Close()
		respRead.Close()
		respWrite.Close()
		return nil, fmt.Errorf("response bell: %w", err)
	}
	go b.drain()
	return b, nil
}

// drain turns any number of request-bell bytes into one pending wake-up
// per subscriber: each read takes everything available, and the sends
// never block, so a flood costs one wake-up per read, not one per byte.
// It ends when the bell is closed or every writer is gone.
func (b *Bells) drain() {
	defer close(b.drained)
	buf := make([]byte, 4096)
	for {
		n, err := b.reqRead.Read(buf)
		if n > 0 {
			b.broadcast()
		}
		if err != nil {
			return
		}
	}
}

// broadcast gives every subscriber a pending wake-up. A ring does not say
// whose cell published, so every server of the kernel looks at its own
// directory; one that finds nothing has lost a listing, nothing more.
func (b *Bells) broadcast() {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Subscribe returns a channel that receives every request-bell wake-up
// from now on, coalesced to at most one pending, and the function that
// ends the subscription (idempotent; the channel is never closed, it just
// stops receiving). Several session servers of one kernel (its queued
// cells) may be subscribed at once. A nil Bells never wakes.
func (b *Bells) Subscribe() (wake <-chan struct{}, cancel func()) {
	if b == nil {
		return nil, func() {}
	}
	ch := make(chan struct{}, 1)
	b.subMu.Lock()
	b.subs[ch] = struct{}{}
	b.subMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.subMu.Lock()
			delete(b.subs, ch)
			b.subMu.Unlock()
		})
	}
}

// ChildFiles returns the child's ends in fd order, for exec.Cmd.ExtraFiles:
// [request-bell write end (fd 3), response-bell read end (fd 4)].
func (b *Bells) ChildFiles() []*os.File {
	return []*os.File{b.reqWrite, b.respRead}
}

// CloseChildEnds closes the host's copies of the child's ends once the
// child has started (or failed to), so the request bell reads EOF when
// the child and everything it shared the fd with are gone.
func (b *Bells) CloseChildEnds() error {
	b.childOnce.Do(func() {
		b.childErr = errors.Join(b.reqWrite.Close(), b.respRead.Close())
	})
	return b.childErr
}

// Wake delivers coalesced request-bell wake-ups: the subscription the
// per-call loop uses, made when the bells were created. A nil Bells never
// wakes.
func (b *Bells) Wake() <-chan struct{} {
	if b == nil {
		return nil
	}
	return b.wake
}

var ring = [1]byte{1}

// Ring writes one byte on the response bell without ever blocking: a full
// pipe already holds an unread ring, and a gone reader needs none. A nil
// Bells does nothing.
func (b *Bells) Ring() {
	if b == nil {
		return
	}
	_ = b.ringConn.Write(func(fd uintptr) bool {
		_, _ = syscall.Write(int(fd), ring[:])
		return true // never wait for writability
	})
}

// Close closes every end and waits for the drain goroutine to finish.
func (b *Bells) Close() error {
	if b == nil {
		return nil
	}
	b.closeOnce.Do(func() {
		b.closeErr = errors.Join(b.CloseChildEnds(), b.reqRead.Close(), b.respWrite.Close())
		<-b.drained
	})
	return b.closeErr
}
