package pump

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Bells are a run's two doorbell pipes (design.md departure 1): the
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

	wake    chan struct{}
	drained chan struct{}

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

// drain turns any number of request-bell bytes into one pending wake-up:
// each read takes everything available, and the send never blocks, so a
// flood costs one wake-up per read, not one per byte. It ends when the
// bell is closed or every writer is gone.
func (b *Bells) drain() {
	defer close(b.drained)
	buf := make([]byte, 4096)
	for {
		n, err := b.reqRead.Read(buf)
		if n > 0 {
			select {
			case b.wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
		if err != nil {
			return
		}
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

// Wake delivers coalesced request-bell wake-ups. A nil Bells never wakes.
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
