// Package pump is the host side of execute_code's file-RPC bridge
// (bridge.md §5 and §6.4). A script's helper calls arrive as
// req-<id>.json files in a private rpc directory; the pump authenticates
// them against the run's token, claims them serially (replay memory, call
// budget, tool allowlist, policy, claim markers), dispatches the claims to
// tools in waves of Config.MaxParallel, spends the result-byte budget
// serially and answers every call with a res-<id>.json file. It also
// forwards notify-<n>.json frames, reads the text-<n>.json result blocks
// and the shim's exception record once a script has ended, and recovers
// the debts of a sweep that died mid-flight from its claim markers and a
// host-side claim ledger.
//
// Wake-ups (design.md departure 1): the shim rings a doorbell pipe after
// publishing a frame and the pump rings back after each response, so a
// call is swept at once; polling is only a slow fallback. A ring carries
// no authority, only "look at the directory now", and a flood of rings is
// absorbed by coalescing and by a backoff after sweeps that found nothing.
//
// The pump may call tools (through the tools.Tool interface, with a context
// derived from the run's), privatetmp (to publish responses) and zerolog.
// It must never recurse into or delete a directory in the rpc directory
// (hygiene is a plain unlink of files and links), never follow a link when
// writing, never log or echo the token, and never dispatch a request after
// the script has exited.
package pump
