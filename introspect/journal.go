package introspect

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/executecode/executecode/telemetry"
)

// DefaultJournalSize is how many lifecycle entries a Journal keeps.
const DefaultJournalSize = 1024

// Kind is the record kind of every journal entry (docs/architecture.md,
// Telemetry).
const Kind = "python_repl_lifecycle_observed"

// Entry is one redacted lifecycle record: a python_repl event's summary
// (its lifecycle name, measurements and metadata), when it was observed
// and its sequence number. It carries no run, session or agent identity.
type Entry struct {
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	telemetry.Summary
}

// Journal keeps the most recent lifecycle entries in a bounded ring, and
// the running total of dropped late output. It is an Immediate telemetry
// handler: recording is a copy under a short lock.
type Journal struct {
	mu   sync.Mutex
	ring []Entry
	next int
	n    int
	seq  uint64

	droppedLate atomic.Int64
	now         func() time.Time
}

// NewJournal keeps the last size entries; size 0 stores none (the totals
// are still kept), a negative size means DefaultJournalSize.
func NewJournal(size int) *Journal {
	if size < 0 {
		size = DefaultJournalSize
	}
	return &Journal{ring: make([]Entry, size), now: time.Now}
}

// Handle records e if it is a python_repl event; anything else is
// ignored. It never fails.
func (j *Journal) Handle(e telemetry.Event) {
	if stop, ok := e.(telemetry.CellStop); ok && stop.DroppedLateOutput > 0 {
		j.droppedLate.Add(int64(stop.DroppedLateOutput))
	}
	s, ok := telemetry.Summarize(e)
	if !ok || len(j.ring) == 0 {
		return
	}
	at := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	j.ring[j.next] = Entry{Seq: j.seq, At: at, Kind: Kind, Summary: s}
	j.next = (j.next + 1) % len(j.ring)
	j.n = min(j.n+1, len(j.ring))
}

// Immediate: recording never waits.
func (j *Journal) Immediate() {}

// Entries returns the kept entries, oldest first. Sequence numbers show
// how many older entries the ring has overwritten.
func (j *Journal) Entries() []Entry {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Entry, 0, j.n)
	start := (j.next - j.n + len(j.ring)) % max(len(j.ring), 1)
	for i := range j.n {
		e := j.ring[(start+i)%len(j.ring)]
		// The caller gets maps of its own: the ring stays as recorded.
		e.Measurements, e.Metadata = maps.Clone(e.Measurements), maps.Clone(e.Metadata)
		out = append(out, e)
	}
	return out
}

// DroppedLateOutputBytes is the total of output dropped as late
// (docs/protocol.md, Late output and thread generations).
func (j *Journal) DroppedLateOutputBytes() int64 {
	if j == nil {
		return 0
	}
	return j.droppedLate.Load()
}
