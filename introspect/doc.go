// Package introspect is what an operator can see of the runtime, and nothing
// of what its scripts do: the aggregate Snapshot of the kernel subsystem
// (exact counts and the settings in effect), answered by an introspect actor
// that asks the registry; the Journal, a bounded ring of redacted
// python_repl_lifecycle_observed entries (docs/architecture.md, Telemetry);
// and Metrics, a Prometheus collector over the same events and snapshot.
//
// It reads telemetry events and registry snapshots only. It holds no
// identity, key, path, PID, code, output or error text: entries are
// telemetry summaries, snapshots are counts and settings, metric labels
// come from the telemetry enums' fixed lists. It never touches kernel
// state; its actor only asks the registry, and it restarts on its own, so
// its failure never reaches a kernel.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package introspect
