package telemetry

import (
	"time"

	"github.com/rs/zerolog"
)

// Events of the kernel registry (kernel.md §10.1): kernel starts, stops,
// crashes and reaps, and fallbacks. Every field is a count, a duration or
// a reason from a fixed list; a reason outside its list is written as that
// list's default, and a negative count or duration as 0.

// SessionStopReason says why the registry stopped a kernel.
type SessionStopReason string

const (
	StopShutdown         SessionStopReason = "shutdown"
	StopReset            SessionStopReason = "reset"
	StopOwnerDetached    SessionStopReason = "owner_detached"
	StopCapacityEviction SessionStopReason = "capacity_eviction"
)

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

func (SessionStart) Name() string { return "coding_agent.python_repl.session.start" }

func (s SessionStart) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int("live_kernels", registryCount(s.LiveKernels)).Int("capacity", registryCount(s.Capacity))
}

// SessionStop: a kernel the registry stopped is gone.
type SessionStop struct {
	Duration    time.Duration // the kernel's life
	LiveKernels int
	Capacity    int
	Reason      SessionStopReason
}

func (SessionStop) Name() string { return "coding_agent.python_repl.session.stop" }

func (s SessionStop) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int64("duration_ms", registryMillis(s.Duration)).
		Int("live_kernels", registryCount(s.LiveKernels)).Int("capacity", registryCount(s.Capacity)).
		Str("reason", s.Reason.valid())
}

// SessionCrash: a kernel failed to start (Duration 0) or died on its own.
type SessionCrash struct {
	Duration    time.Duration
	LiveKernels int
	Capacity    int
	Reason      SessionCrashReason
}

func (SessionCrash) Name() string { return "coding_agent.python_repl.session.crash" }

func (s SessionCrash) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int64("duration_ms", registryMillis(s.Duration)).
		Int("live_kernels", registryCount(s.LiveKernels)).Int("capacity", registryCount(s.Capacity)).
		Str("reason", s.Reason.valid())
}

// SessionReap: the reaper stopped a kernel.
type SessionReap struct {
	Idle        time.Duration // since the kernel's last use
	LiveKernels int           // after its removal
	Capacity    int
	Reason      SessionReapReason
}

func (SessionReap) Name() string { return "coding_agent.python_repl.session.reap" }

func (s SessionReap) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Int64("idle_ms", registryMillis(s.Idle)).
		Int("live_kernels", registryCount(s.LiveKernels)).Int("capacity", registryCount(s.Capacity)).
		Str("reason", s.Reason.valid())
}

// Fallback: a session call ran isolated, or a kernel stop failed.
type Fallback struct {
	Reason FallbackReason
}

func (Fallback) Name() string { return "coding_agent.python_repl.fallback" }

func (f Fallback) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Str("reason", f.Reason.valid())
}

func registryCount(n int) int { return max(n, 0) }

func registryMillis(d time.Duration) int64 { return max(d.Milliseconds(), 0) }
