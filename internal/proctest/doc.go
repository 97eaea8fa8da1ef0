// Package proctest finds processes for tests that must prove none is left
// behind: by pid, by a marker variable in their environment (which
// survives whatever became of their parent and process group), and by
// waiting for them to go. Zombies count as gone: they run nothing and
// their reaper may be a process the test does not control.
//
// It reads /proc only; it is imported by test files and never by the
// runtime. Like every package but executecode, config, tools, telemetry
// and approval.Approver, it is the runtime's own machinery, with no
// compatibility promise.
package proctest
