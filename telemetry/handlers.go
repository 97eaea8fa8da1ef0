package telemetry

import (
	"sync"

	"github.com/rs/zerolog"
)

// Handler receives events. A Handler that is not Immediate is called from
// a goroutine of its own, one event at a time, in emission order.
type Handler interface {
	Handle(Event)
}

// Immediate marks a Handler cheap enough to run on the emitter's
// goroutine: its Handle does a bounded amount of work and never waits on
// I/O or on another goroutine (an atomic add, an append under a short
// lock). The Bus calls it synchronously, so what it records is visible as
// soon as Emit returns.
type Immediate interface {
	Handler
	Immediate()
}

// HandlerFunc adapts a function to Handler. It is queued, not Immediate.
type HandlerFunc func(Event)

func (f HandlerFunc) Handle(e Event) { f(e) }

// LogHandler writes one structured zerolog line per event:
// {"level":"info","event":"coding_agent.python_repl.cell.stop","count":1,
// "duration_ms":12,"outcome":"ok","dropped_late_output_bytes":0,
// "message":"telemetry"}.
type LogHandler struct{ Logger zerolog.Logger }

func (l LogHandler) Handle(e Event) {
	l.Logger.Info().Str("event", e.Name()).EmbedObject(e).Msg("telemetry")
}

// Recorder keeps every event in memory, for tests. It is Immediate, so an
// event is recorded by the time Emit returns.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *Recorder) Handle(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Immediate: recording is an append under a lock.
func (r *Recorder) Immediate() {}

// Events returns a copy of what was recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Names returns the names of the recorded events, in order.
func (r *Recorder) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.Name()
	}
	return out
}

// Forward is an Immediate handler that re-emits every event on another
// Bus, whose own subscribers then get it as that Bus delivers.
type Forward struct{ To *Bus }

func (f Forward) Handle(e Event) { f.To.Emit(e) }

// Immediate: Emit never blocks.
func (Forward) Immediate() {}
