// Package shimpy renders the python side of the execute-code bridge: the
// exec_tools module a script imports (helpers that call host tools over
// the file-RPC directory, plus text(), notify() and batch()), the one-line
// import injected before a script, and the per-call prelude: the module
// with a last line binding it to the run's token, rpc directory and
// doorbells, which it reads from an inherited socket (RunSocket), so the
// module's text is the same for every run of a runtime and the token is
// never rendered into it. The shim authenticates what it writes and what
// it believes with an HMAC keyed by the token.
//
// The python source is embedded with go:embed and rendered purely: the same
// inputs always give byte-identical text. The shim is stdlib-only python.
//
// shimpy owns the shim's half of the protocol in docs/protocol.md, Part 1
// (file names, frame shapes, the doorbell wait) and the exception frame it
// leaves for the host. It may call only the Go standard library, x/sys/unix
// (for the run's socket pair) and tools (for the helper names and their
// order). It never touches the filesystem, starts a process, or decides
// anything the host enforces: authentication, budgets other than text(), and
// dispatch belong to pump.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package shimpy
