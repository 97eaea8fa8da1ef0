package telemetry

import "github.com/rs/zerolog"

// fieldWriter receives an event's fields: measurements (non-negative
// integers) and labels (values from a fixed list). Every event writes its
// fields through one, so the log line and the introspection summary of an
// event can never disagree about what it carries.
type fieldWriter interface {
	measure(name string, v int64)
	label(name, v string)
}

// logFields writes fields into a zerolog event.
type logFields struct{ e *zerolog.Event }

func (l logFields) measure(name string, v int64) { l.e.Int64(name, v) }
func (l logFields) label(name, v string)         { l.e.Str(name, v) }

// summaryFields collects fields into a Summary.
type summaryFields struct{ s *Summary }

func (f summaryFields) measure(name string, v int64) { f.s.Measurements[name] = v }
func (f summaryFields) label(name, v string)         { f.s.Metadata[name] = v }

// nonNegative coerces a count or a duration to the measurement range.
func nonNegative[T ~int | ~int64](n T) int64 { return int64(max(n, 0)) }
