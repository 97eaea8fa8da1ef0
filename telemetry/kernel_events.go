package telemetry

import (
	"time"

	"github.com/rs/zerolog"
)

// Events of a kernel worker (kernel.md §10.1): one cell.start per dispatched
// cell, at most one cell.stop and at most one cell.cancel per cell. Every
// field is a count, a duration or a reason from a fixed list; a reason
// outside its list is written as that list's default, and a negative count
// or duration as 0.

// CellOutcome says how a cell ended for its caller.
type CellOutcome string

const (
	OutcomeOK            CellOutcome = "ok"
	OutcomeException     CellOutcome = "exception"
	OutcomeTimeout       CellOutcome = "timeout"
	OutcomePortExit      CellOutcome = "port_exit"
	OutcomeProtocolFault CellOutcome = "protocol_fault"
	OutcomeInterrupted   CellOutcome = "interrupted"
	OutcomeUnknown       CellOutcome = "unknown"
)

func (o CellOutcome) valid() string {
	switch o {
	case OutcomeOK, OutcomeException, OutcomeTimeout, OutcomePortExit, OutcomeProtocolFault,
		OutcomeInterrupted, OutcomeUnknown:
		return string(o)
	}
	return string(OutcomeUnknown)
}

// CancelCause says why a cell's kernel began to be discarded.
type CancelCause string

const (
	CauseTimeout    CancelCause = "timeout"
	CauseCallerExit CancelCause = "caller_exit"
	CauseShutdown   CancelCause = "shutdown"
	CauseUnknown    CancelCause = "unknown"
)

func (c CancelCause) valid() string {
	switch c {
	case CauseTimeout, CauseCallerExit, CauseShutdown, CauseUnknown:
		return string(c)
	}
	return string(CauseUnknown)
}

// CellStart: a worker dispatched a cell to its kernel.
type CellStart struct {
	QueueDepth    int // cells still waiting behind this one
	QueueCapacity int // the worker's max_queued_cells
}

func (CellStart) Name() string { return "coding_agent.python_repl.cell.start" }

func (s CellStart) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int("queue_depth", max(s.QueueDepth, 0)).Int("queue_capacity", max(s.QueueCapacity, 0))
}

// CellStop: a cell's caller got its result (or was gone).
type CellStop struct {
	Duration time.Duration
	Outcome  CellOutcome
	// DroppedLateOutput counts bytes that threads of earlier cells wrote
	// during this one and the runner dropped (design ruling 7).
	DroppedLateOutput int
}

func (CellStop) Name() string { return "coding_agent.python_repl.cell.stop" }

func (s CellStop) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int64("duration_ms", max(s.Duration.Milliseconds(), 0)).Str("outcome", s.Outcome.valid()).
		Int("dropped_late_output_bytes", max(s.DroppedLateOutput, 0))
}

// CellCancel: a running cell's kernel is being discarded.
type CellCancel struct {
	Duration time.Duration
	Cause    CancelCause
}

func (CellCancel) Name() string { return "coding_agent.python_repl.cell.cancel" }

func (c CellCancel) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int64("duration_ms", max(c.Duration.Milliseconds(), 0)).Str("cause", c.Cause.valid())
}
