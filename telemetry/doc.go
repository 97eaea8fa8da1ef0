// Package telemetry defines the runtime's typed events and how they reach
// subscribers: a Handler interface, a Bus that fans events out without ever
// blocking or failing the emitter, a zerolog handler (one line per event)
// and an in-memory Recorder for tests.
//
// Events are redacted by construction: their fields are counts, durations
// and bounded enums only. No event type may carry code, output, tracebacks,
// tokens, paths, cwd, interpreter paths, PIDs or raw errors. This package
// must not import any other package of the project.
package telemetry
