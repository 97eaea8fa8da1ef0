package telemetry

import (
	"time"

	"github.com/rs/zerolog"
)

// Events of a kernel worker (docs/architecture.md, Telemetry): one
// cell.start per dispatched cell, at most one cell.stop and at most one
// cell.cancel per cell. Every field is a count, a duration or a reason from
// a fixed list; a reason outside its list is written as that list's default,
// and a negative count or duration as 0.

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

// CellOutcomes lists every outcome an event can carry.
var CellOutcomes = []CellOutcome{OutcomeOK, OutcomeException, OutcomeTimeout, OutcomePortExit,
	OutcomeProtocolFault, OutcomeInterrupted, OutcomeUnknown}

// String is the outcome as events carry it: a value outside the list
// reads as "unknown".
func (o CellOutcome) String() string { return o.valid() }

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

// CancelCauses lists every cause an event can carry.
var CancelCauses = []CancelCause{CauseTimeout, CauseCallerExit, CauseShutdown, CauseUnknown}

// String is the cause as events carry it: a value outside the list reads
// as "unknown".
func (c CancelCause) String() string { return c.valid() }

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

func (CellStart) Name() string      { return "coding_agent.python_repl.cell.start" }
func (CellStart) lifecycle() string { return "cell_started" }

func (s CellStart) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("queue_depth", nonNegative(s.QueueDepth))
	w.measure("queue_capacity", nonNegative(s.QueueCapacity))
}

func (s CellStart) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// CellStop: a cell's caller got its result (or was gone).
type CellStop struct {
	Duration time.Duration
	Outcome  CellOutcome
	// DroppedLateOutput counts bytes that threads of earlier cells wrote
	// during this one and the runner dropped (docs/protocol.md, Late output
	// and thread generations).
	DroppedLateOutput int
}

func (CellStop) Name() string      { return "coding_agent.python_repl.cell.stop" }
func (CellStop) lifecycle() string { return "cell_stopped" }

func (s CellStop) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("duration_ms", nonNegative(s.Duration.Milliseconds()))
	w.label("outcome", s.Outcome.valid())
	w.measure("dropped_late_output_bytes", nonNegative(s.DroppedLateOutput))
}

func (s CellStop) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// CellCancel: a running cell's kernel is being discarded.
type CellCancel struct {
	Duration time.Duration
	Cause    CancelCause
}

func (CellCancel) Name() string      { return "coding_agent.python_repl.cell.cancel" }
func (CellCancel) lifecycle() string { return "cell_cancelled" }

func (c CellCancel) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("duration_ms", nonNegative(c.Duration.Milliseconds()))
	w.label("cause", c.Cause.valid())
}

func (c CellCancel) MarshalZerologObject(e *zerolog.Event) { c.fields(logFields{e}) }
