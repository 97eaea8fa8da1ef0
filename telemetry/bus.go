package telemetry

import (
	"sync"

	"github.com/rs/zerolog"
)

// Handler receives events. Handle is called synchronously by Emit, so it
// must be quick; a panicking handler is contained and skipped.
type Handler interface {
	Handle(Event)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(Event)

func (f HandlerFunc) Handle(e Event) { f(e) }

// Bus fans events out to its subscribers. The zero value has no
// subscribers and drops everything; a nil *Bus is valid too.
type Bus struct {
	mu       sync.RWMutex
	handlers []Handler
}

// Subscribe adds h; it receives every event emitted afterwards.
func (b *Bus) Subscribe(h Handler) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handlers = append(b.handlers, h)
}

// Emit delivers e to every subscriber. It never fails its caller: a
// handler's panic is recovered and that handler skipped for this event.
func (b *Bus) Emit(e Event) {
	if b == nil {
		return
	}
	b.mu.RLock()
	hs := b.handlers
	b.mu.RUnlock()
	for _, h := range hs {
		deliver(h, e)
	}
}

func deliver(h Handler, e Event) {
	defer func() { _ = recover() }()
	h.Handle(e)
}

// LogHandler writes one structured zerolog line per event.
type LogHandler struct{ Logger zerolog.Logger }

func (l LogHandler) Handle(e Event) {
	l.Logger.Info().Str("event", e.Name()).EmbedObject(e).Msg("telemetry")
}

// Recorder keeps every event in memory, for tests.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *Recorder) Handle(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of what was recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}
