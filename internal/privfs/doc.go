// Package privfs is the dependency-free core of the private staging
// root that two processes share: the runtime (through privatetmp, which
// owns everything else about staging) and the guard, which outlives a host
// killed with SIGKILL and removes what that host left behind. The guard
// is the runtime's binary re-executed, and its role starts before most
// package initialisers run only if it imports nothing but the standard
// library and golang.org/x/sys/unix, so this package imports nothing
// else either.
//
// It owns the names (root prefix, owner marker, spill prefix), reading
// and parsing the owner marker without following a link or blocking on
// a FIFO, and the bounded removal that never follows a symlink. It never
// creates anything.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package privfs
