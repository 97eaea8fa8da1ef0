package telemetry

import (
	"time"

	"github.com/rs/zerolog"
)

// Events of the kernel registry (docs/architecture.md, Telemetry): kernel
// starts, stops, crashes, reaps and evictions, and fallbacks. Every field is
// a count, a duration or a reason from a fixed list; a reason outside its
// list is written as that list's default, and a negative count or duration
// as 0.

// SessionStopReason says why the registry stopped a kernel.
type SessionStopReason string

const (
	StopShutdown         SessionStopReason = "shutdown"
	StopReset            SessionStopReason = "reset"
	StopOwnerDetached    SessionStopReason = "owner_detached"
	StopCapacityEviction SessionStopReason = "capacity_eviction"
)

// SessionStopReasons lists every stop reason an event can carry.
var SessionStopReasons = []SessionStopReason{StopShutdown, StopReset, StopOwnerDetached, StopCapacityEviction}

// String is the reason as events carry it: a value outside the list reads
// as "shutdown".
func (r SessionStopReason) String() string { return r.valid() }

func (r SessionStopReason) valid() string {
	switch r {
	case StopShutdown, StopReset, StopOwnerDetached, StopCapacityEviction:
		return string(r)
	}
	return string(StopShutdown)
}

// SessionCrashReason says why a kernel failed to start or died on its own.
type SessionCrashReason string

const (
	CrashStartupFailure         SessionCrashReason = "startup_failure"
	CrashPortExit               SessionCrashReason = "port_exit"
	CrashProtocolFault          SessionCrashReason = "protocol_fault"
	CrashCancellationEscalation SessionCrashReason = "cancellation_escalation"
	CrashUnknown                SessionCrashReason = "unknown"
)

// SessionCrashReasons lists every crash reason an event can carry.
var SessionCrashReasons = []SessionCrashReason{CrashStartupFailure, CrashPortExit, CrashProtocolFault,
	CrashCancellationEscalation, CrashUnknown}

// String is the reason as events carry it: a value outside the list reads
// as "unknown".
func (r SessionCrashReason) String() string { return r.valid() }

func (r SessionCrashReason) valid() string {
	switch r {
	case CrashStartupFailure, CrashPortExit, CrashProtocolFault, CrashCancellationEscalation, CrashUnknown:
		return string(r)
	}
	return string(CrashUnknown)
}

// SessionReapReason says why the reaper stopped a kernel.
type SessionReapReason string

const (
	ReapIdle        SessionReapReason = "idle"
	ReapUnreachable SessionReapReason = "unreachable"
)

// SessionReapReasons lists every reap reason an event can carry.
var SessionReapReasons = []SessionReapReason{ReapIdle, ReapUnreachable}

// String is the reason as events carry it: a value outside the list reads
// as "unreachable".
func (r SessionReapReason) String() string { return r.valid() }

func (r SessionReapReason) valid() string {
	switch r {
	case ReapIdle, ReapUnreachable:
		return string(r)
	}
	return string(ReapUnreachable)
}

// FallbackReason says why a session call ran isolated, or (stop_failed,
// from the registry) that a kernel could not be confirmed stopped.
type FallbackReason string

const (
	FallbackMissingSessionScope FallbackReason = "missing_session_scope"
	FallbackCapacityExhausted   FallbackReason = "capacity_exhausted"
	FallbackRegistryUnavailable FallbackReason = "registry_unavailable"
	FallbackStartupFailed       FallbackReason = "startup_failed"
	FallbackStopFailed          FallbackReason = "stop_failed"
	FallbackUnknown             FallbackReason = "unknown"
)

// FallbackReasons lists every fallback reason an event can carry.
var FallbackReasons = []FallbackReason{FallbackMissingSessionScope, FallbackCapacityExhausted,
	FallbackRegistryUnavailable, FallbackStartupFailed, FallbackStopFailed, FallbackUnknown}

// String is the reason as events carry it: a value outside the list reads
// as "unknown".
func (r FallbackReason) String() string { return r.valid() }

func (r FallbackReason) valid() string {
	switch r {
	case FallbackMissingSessionScope, FallbackCapacityExhausted, FallbackRegistryUnavailable,
		FallbackStartupFailed, FallbackStopFailed:
		return string(r)
	}
	return string(FallbackUnknown)
}

// SessionStart: the registry started a kernel.
type SessionStart struct {
	LiveKernels int // live kernels after this one was added
	Capacity    int // the cap the admission used
}

func (SessionStart) Name() string      { return "coding_agent.python_repl.session.start" }
func (SessionStart) lifecycle() string { return "session_started" }

func (s SessionStart) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("live_kernels", nonNegative(s.LiveKernels))
	w.measure("capacity", nonNegative(s.Capacity))
}

func (s SessionStart) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// SessionStop: a kernel ended as asked: the registry stopped it, or it
// stopped itself after a cancellation discarded it.
type SessionStop struct {
	Duration    time.Duration // the kernel's life
	LiveKernels int
	Capacity    int
	Reason      SessionStopReason
}

func (SessionStop) Name() string      { return "coding_agent.python_repl.session.stop" }
func (SessionStop) lifecycle() string { return "session_stopped" }

func (s SessionStop) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("duration_ms", nonNegative(s.Duration.Milliseconds()))
	w.measure("live_kernels", nonNegative(s.LiveKernels))
	w.measure("capacity", nonNegative(s.Capacity))
	w.label("reason", s.Reason.valid())
}

func (s SessionStop) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// SessionCrash: a kernel failed to start (Duration 0) or died on its own.
type SessionCrash struct {
	Duration    time.Duration
	LiveKernels int
	Capacity    int
	Reason      SessionCrashReason
}

func (SessionCrash) Name() string      { return "coding_agent.python_repl.session.crash" }
func (SessionCrash) lifecycle() string { return "session_crashed" }

func (s SessionCrash) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("duration_ms", nonNegative(s.Duration.Milliseconds()))
	w.measure("live_kernels", nonNegative(s.LiveKernels))
	w.measure("capacity", nonNegative(s.Capacity))
	w.label("reason", s.Reason.valid())
}

func (s SessionCrash) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// SessionReap: the reaper stopped a kernel. Its session.stop (reason
// shutdown) follows once the worker is gone.
type SessionReap struct {
	Idle        time.Duration // since the kernel's last use
	LiveKernels int           // after its removal
	Capacity    int
	Reason      SessionReapReason
}

func (SessionReap) Name() string      { return "coding_agent.python_repl.session.reap" }
func (SessionReap) lifecycle() string { return "session_reaped" }

func (s SessionReap) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("idle_ms", nonNegative(s.Idle.Milliseconds()))
	w.measure("live_kernels", nonNegative(s.LiveKernels))
	w.measure("capacity", nonNegative(s.Capacity))
	w.label("reason", s.Reason.valid())
}

func (s SessionReap) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// SessionEvict: admission evicted the least recently used idle kernel to
// make room for a new one under the cap. Like a reap it
// is emitted at the decision; its session.stop (reason capacity_eviction)
// follows once the worker is gone.
type SessionEvict struct {
	Idle        time.Duration // since the evicted kernel's last use
	LiveKernels int           // after its removal
	Capacity    int
}

func (SessionEvict) Name() string      { return "coding_agent.python_repl.session.evict" }
func (SessionEvict) lifecycle() string { return "session_evicted" }

func (s SessionEvict) fields(w fieldWriter) {
	w.measure("count", 1)
	w.measure("idle_ms", nonNegative(s.Idle.Milliseconds()))
	w.measure("live_kernels", nonNegative(s.LiveKernels))
	w.measure("capacity", nonNegative(s.Capacity))
}

func (s SessionEvict) MarshalZerologObject(e *zerolog.Event) { s.fields(logFields{e}) }

// Fallback: a session call ran isolated (emitted by the facade on every
// fallback), or a kernel stop failed (emitted by the registry, stop_failed).
type Fallback struct {
	Reason FallbackReason
}

func (Fallback) Name() string      { return "coding_agent.python_repl.fallback" }
func (Fallback) lifecycle() string { return "fallback" }

func (f Fallback) fields(w fieldWriter) {
	w.measure("count", 1)
	w.label("reason", f.Reason.valid())
}

func (f Fallback) MarshalZerologObject(e *zerolog.Event) { f.fields(logFields{e}) }
