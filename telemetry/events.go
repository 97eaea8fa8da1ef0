package telemetry

import (
	"time"

	"github.com/rs/zerolog"
)

// Event is one telemetry event. Name is the dotted event family, e.g.
// "coding_agent.execute_code.stop".
type Event interface {
	Name() string
	// MarshalZerologObject writes only the event's measurements and
	// categorical metadata.
	MarshalZerologObject(e *zerolog.Event)
}

// ExecuteCodeStop is emitted once by every per-call run (fallback runs
// included), when it has ended and its result is known. Session cells do
// not emit it.
type ExecuteCodeStop struct {
	Duration  time.Duration
	RPCCalls  int
	RPCDenied int
	// ExitCode is nil when the run was cancelled or timed out.
	ExitCode *int
}

func (ExecuteCodeStop) Name() string { return "coding_agent.execute_code.stop" }

func (s ExecuteCodeStop) MarshalZerologObject(e *zerolog.Event) {
	e.Int64("duration_us", nonNegative(s.Duration.Microseconds())).
		Int("count", 1).
		Int64("rpc_calls", nonNegative(s.RPCCalls)).
		Int64("rpc_denied", nonNegative(s.RPCDenied))
	if s.ExitCode != nil {
		e.Int("exit_code", *s.ExitCode)
	} else {
		e.Interface("exit_code", nil)
	}
}
