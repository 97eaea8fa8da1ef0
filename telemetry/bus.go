package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
)

// DefaultBuffer is how many events a queued subscriber may fall behind
// before the Bus drops its events.
const DefaultBuffer = 1024

// Bus fans events out to its subscribers without ever blocking or failing
// the emitter. An Immediate handler is called on the emitter's goroutine;
// every other handler gets a bounded queue of its own, drained by a
// goroutine that exists only while the queue is not empty, so a slow
// handler delays nobody but itself and an idle Bus holds no goroutine. A
// full queue drops the event and counts it (Dropped).
//
// The zero value is ready to use; a nil *Bus is valid and drops
// everything.
type Bus struct {
	mu     sync.RWMutex
	subs   []*subscriber
	closed bool

	dropped atomic.Uint64

	// drainers counts the running drain goroutines; idle is closed when
	// the count returns to zero.
	dmu      sync.Mutex
	drainers int
	idle     chan struct{}
}

// subscriber is one Handler and, unless it is Immediate, its queue.
type subscriber struct {
	h         Handler
	immediate bool

	mu       sync.Mutex
	queue    []Event // ring of cap(queue) slots
	head, n  int
	draining bool
	removed  bool
}

// Subscribe adds h with a queue of DefaultBuffer events; it receives every
// event emitted afterwards, in emission order. The returned function
// removes it: events still queued for it are discarded, and one being
// delivered finishes.
func (b *Bus) Subscribe(h Handler) (unsubscribe func()) {
	return b.SubscribeBuffered(h, DefaultBuffer)
}

// SubscribeBuffered is Subscribe with a queue of size events (at least
// 1). The size is ignored for an Immediate handler.
func (b *Bus) SubscribeBuffered(h Handler, size int) (unsubscribe func()) {
	if b == nil || h == nil {
		return func() {}
	}
	s := &subscriber{h: h}
	if _, ok := h.(Immediate); ok {
		s.immediate = true
	} else {
		s.queue = make([]Event, max(size, 1))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return func() {}
	}
	// Copy on write: Emit iterates a snapshot of the slice without a lock.
	b.subs = append(append([]*subscriber(nil), b.subs...), s)
	return func() { b.remove(s) }
}

func (b *Bus) remove(s *subscriber) {
	b.mu.Lock()
	subs := make([]*subscriber, 0, len(b.subs))
	for _, o := range b.subs {
		if o != s {
			subs = append(subs, o)
		}
	}
	b.subs = subs
	b.mu.Unlock()
	s.mu.Lock()
	s.removed = true
	clear(s.queue)
	s.head, s.n = 0, 0
	s.mu.Unlock()
}

// Emit delivers e to every subscriber. It never blocks on a queued
// handler and never fails: a panicking handler is contained and skipped
// for that event. After Close, events are dropped and counted.
func (b *Bus) Emit(e Event) {
	if b == nil || e == nil {
		return
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		b.dropped.Add(1)
		return
	}
	subs := b.subs
	// Queued offers happen under the read lock, so Close, which takes the
	// write lock, never misses a drainer that is about to start.
	for _, s := range subs {
		if !s.immediate {
			b.offer(s, e)
		}
	}
	b.mu.RUnlock()
	for _, s := range subs {
		if s.immediate {
			deliver(s.h, e)
		}
	}
}

func (b *Bus) offer(s *subscriber, e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return
	}
	if s.n == len(s.queue) {
		b.dropped.Add(1)
		return
	}
	s.queue[(s.head+s.n)%len(s.queue)] = e
	s.n++
	if !s.draining {
		s.draining = true
		b.drainerStarted()
		go b.drain(s)
	}
}

// drain delivers s's queue in order and returns once it is empty.
func (b *Bus) drain(s *subscriber) {
	defer b.drainerDone()
	for {
		s.mu.Lock()
		if s.n == 0 {
			s.draining = false
			s.mu.Unlock()
			return
		}
		e := s.queue[s.head]
		s.queue[s.head] = nil
		s.head = (s.head + 1) % len(s.queue)
		s.n--
		s.mu.Unlock()
		deliver(s.h, e)
	}
}

func (b *Bus) drainerStarted() {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	if b.drainers == 0 {
		b.idle = make(chan struct{})
	}
	b.drainers++
}

func (b *Bus) drainerDone() {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	b.drainers--
	if b.drainers == 0 {
		close(b.idle)
	}
}

// Flush waits until every queued event has been delivered (or ctx ends).
// Events emitted meanwhile are waited for too.
func (b *Bus) Flush(ctx context.Context) error {
	if b == nil {
		return nil
	}
	for {
		b.dmu.Lock()
		n, idle := b.drainers, b.idle
		b.dmu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the Bus: later events are dropped (and counted), and Close
// waits, at most until ctx ends, for the queued ones to be delivered.
// Closing twice is harmless.
func (b *Bus) Close(ctx context.Context) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.Flush(ctx)
}

// Dropped is how many events were not delivered to some subscriber
// because its queue was full or the Bus was closed.
func (b *Bus) Dropped() uint64 {
	if b == nil {
		return 0
	}
	return b.dropped.Load()
}

func deliver(h Handler, e Event) {
	defer func() { _ = recover() }()
	h.Handle(e)
}
