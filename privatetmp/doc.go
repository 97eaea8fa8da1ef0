// Package privatetmp owns every private temporary object of the runtime:
// the per-process staging root execute-code-private-XXXXXXXXXX (under TMPDIR, or
// /dev/shm when TMPDIR is unset and it is writable) with its
// .execute-code-owner marker, the reservation primitives the pump and facade use
// for workspaces, bridge directories and response files, the full-output
// spill files, bounded tree removal, the boot-time stale-root sweep and the
// 24-hour spill reaper.
//
// Every object is made with Go's own exclusive creation at its final mode
// (directories 0700, files 0600, O_EXCL|O_NOFOLLOW; no mktemp process, no
// chmod afterwards) and then validated for type, mode and owner uid. A
// failed validation is ErrUnsafe and callers fail closed: a process umask
// that strips bits from a new object is such a failure, never repaired.
// Nothing here follows a symlink: lstat, O_NOFOLLOW and unlink of the link.
//
// It may call only the standard library, golang.org/x/sys/unix, zerolog
// and internal/privfs, the dependency-free core it shares with the guard
// (names, the marker, bounded removal).
// It must never import another package of the project, start a process,
// recurse into a stale root, or put a path into a report: SweepReport and
// ReapReport are counts, and log lines name paths only at debug level (the
// root) or not at all.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package privatetmp
