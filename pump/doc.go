// Package pump is the host side of execute_code's file-RPC bridge
// (docs/protocol.md, Part 1). A script's helper calls arrive as
// req-<id>-<mac>.json files in a private rpc directory; the pump
// authenticates each against the run's token (mac.go: an HMAC of kind,
// number and body in the name), claims them serially (replay memory, call
// budget, tool allowlist, policy, claim markers), dispatches the claims
// through its Gate in waves of Config.MaxParallel, spends the result-byte
// budget serially and answers every call with an authenticated
// res-<id>.json file. It also forwards notify-<n>-<mac>.json frames, reads the
// text-<n>-<mac>.json result blocks and the shim's exception-<mac>.json
// record once a script has ended, refusing (and counting) every frame
// whose MAC fails, and recovers the debts of a sweep that died mid-flight
// from its claim markers and a host-side claim ledger. The staging root
// is shared by every session of the user, so nothing in the directory is
// believed without its MAC.
//
// One driver runs sweeps: the Server, one per session cell
// (StartServer) and one per per-call run (StartRun). Its loop goroutine
// owns the bridge's stats and its in-flight sweep, each sweep runs on its
// own goroutine under a context derived from the cell signal (a run's is
// the run's context), and the claim ledger is fed synchronously, before
// every spend, into the server's memory. A sweep that panics, exits, or
// is cancelled with claims in flight is settled conservatively (the stats
// from before it, the accounting-loss flag, recovery from markers and
// ledger); a sweep that ignores its cancellation is abandoned and its late
// result refused by generation. A run differs only at its ends: no sweep
// starts once its interpreter has exited, the sweep in flight then is
// settled and its last pass (notifications, unsettled markers) runs once, and a sweep
// the run's own end cancelled keeps the figures it counted. The server's
// callbacks (OnNotify, OnAuthFailure, OnRoundTrip, tools,
// policy) must not call back into the same server. The two observers feed
// telemetry and metrics: a failed authentication, and a helper call's
// tool, duration and outcome, never its arguments or content.
//
// Wake-ups: the shim rings a doorbell pipe (internal/bell) with the name
// of each request it publishes and the pump rings back with the id of
// each response, so a call is claimed at once, by opening the named file
// without listing the directory; a plain ring, and a slow fallback timer,
// list it. A ring carries no authority, only where to look: a named file
// is checked exactly as a listed one, and a flood of rings is absorbed by
// coalescing, by a bound on the names held and by a backoff after sweeps
// that found nothing. A kernel's bells are shared by the servers of its
// queued cells: each subscribes, gets every name and looks for it in its
// own directory only.
//
// Approvals (docs/protocol.md, Approvals): a call its Policy requires
// approval for, when Config.Approvals is set, is held in its dispatch until
// the approval broker decides. Every claim gets an approval id at claim
// time, before its dispatch exists; a gated dispatch first has the broker
// watch the sweep and itself (the prompt is cancelled after either ends),
// then requests approval under that id on the sweep's context. Denied,
// cancelled, timed-out and failed approvals are answered "approval
// denied/timed out/failed for '<tool>'" and counted as denials; the tool
// never runs. Policy denial comes first and never prompts.
//
// The gate (docs/architecture.md, The gate): Config.Gate nil is the
// local one (NewGate: approval, the tool, the outcome normalised); a
// kernel node's pump has one that forwards each call to the session side,
// where a GuardedGate decides it again on its own figures (replay memory,
// budgets, policy, gating and approval ids, a params bound, a ledger)
// before the local gate runs it, settling answers in the order it admits
// the calls; a Sender gate gets each wave from the sweep in claim order.
//
// The pump may call tools (through the tools.Tool interface, with a context
// derived from the run's), its Gate, the approval broker, internal/bell and
// zerolog; it publishes responses as privatetmp.WriteFile does, with its
// own system calls (response.go).
// It must never recurse into or delete a directory in the rpc directory
// (hygiene is a plain unlink of files and links), never follow a link when
// writing, never log or echo the token, and never dispatch a request after
// the script has exited.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package pump
