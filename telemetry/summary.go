package telemetry

// Summary is a python_repl event as an introspection record holds it
// (docs/architecture.md, Telemetry): the lifecycle name (session_started,
// cell_stopped, fallback, bridge_denied, …), the event's measurements and
// its metadata. Like the events, it holds counts, durations in their unit
// and labels from fixed lists only.
type Summary struct {
	Event        string            `json:"event"`
	Measurements map[string]int64  `json:"measurements"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// lifecycleEvent is a python_repl event: it has a lifecycle name and
// writes its fields through a fieldWriter.
type lifecycleEvent interface {
	Event
	lifecycle() string
	fields(w fieldWriter)
}

// Summarize returns the summary of a python_repl event; ok is false for
// every other family (execute_code.stop, approvals), which introspection
// does not record.
func Summarize(e Event) (s Summary, ok bool) {
	le, ok := e.(lifecycleEvent)
	if !ok {
		return Summary{}, false
	}
	s = Summary{Event: le.lifecycle(), Measurements: map[string]int64{}, Metadata: map[string]string{}}
	le.fields(summaryFields{&s})
	if len(s.Metadata) == 0 {
		s.Metadata = nil
	}
	return s, true
}
