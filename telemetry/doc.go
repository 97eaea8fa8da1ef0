// Package telemetry defines the runtime's typed events and how they reach
// subscribers: a Handler interface, a Bus that fans events out without ever
// blocking or failing the emitter (Immediate handlers inline, every other
// handler through a bounded queue of its own that drops and counts on
// overflow), a zerolog handler (one line per event) and an in-memory
// Recorder for tests. Summarize reduces a python_repl event to the
// redacted lifecycle summary introspection records.
//
// Events are redacted by construction: their fields are counts, durations
// and enums from fixed lists only, and an enum value outside its list is
// written (and printed) as the list's default. No event type may carry
// code, output, tracebacks, tokens, paths, cwd, interpreter paths, PIDs,
// key digests, identities or raw errors. This package must not import any
// other package of the project but tools, whose helper names its approval
// events carry.
package telemetry
