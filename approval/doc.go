// Package approval is the approval broker of execute_code (docs/protocol.md,
// Approvals):
// one protoactor actor that holds the pending approval prompts, the
// approvals stored by scope, and a watcher actor per approval-requiring
// claim.
//
// Every state change is one message to the broker actor. A pending prompt
// is taken by exactly one of four transitions: Resolve, Cancel, the
// waiter's timeout, or the host Approver's own answer. The winner applies
// its effects (a stored approval for approve_session/agent/global, one
// telemetry event, the waiter's outcome); every loser gets ErrNotPending
// (a losing timeout: TimedOut) and does nothing else, so a cancelled or
// timed-out prompt can never install an approval. Goroutines the package
// starts (the Approver call, the watchers' channel forwarders) only send
// the actor messages; they never read or write its state.
//
// Stored approvals are answered without a prompt, in the order global >
// agent > session, each by the exact argument hash and then by the
// tool-wide grant. A prompt's approve_* decision stores the exact
// arguments; tool-wide grants come only from Config.Grants. approve_once
// and deny store nothing. Approvals live in the actor's memory: a restart
// of the broker forgets those it stored (later calls prompt again) and
// cancels every pending prompt.
//
// Watchers: Broker.Watch spawns a child actor that cancels the prompt after
// the sweep's end and again after the dispatch's end, and stops once both
// ended and both cancels were applied. The second cancel is enqueued
// strictly after the dispatch ended, hence after any registration the
// dispatch made, so a prompt registered after the sweep died cannot be
// orphaned. Boundary: a prompt lives as long as its dispatch; tool code that
// keeps a dispatch running past its sweep (for example a Request on a
// context not derived from the sweep's) keeps its prompt until that dispatch
// ends, then the watcher reaps it. A restart of the broker stops its
// watchers with it; a prompt registered after a restart is unwatched and
// ends with its waiter (its context or timeout).
//
// The package may call telemetry (counts and bounded enums only: the tool
// as an allowlist name or "other", the decision) and zerolog. It never
// runs tools, never touches a bridge directory, and never writes approval
// ids, session or agent ids, arguments, rationales or raw errors into
// telemetry or logs.
//
// Only one half of it is an embedder's API: Approver and ApproverFunc, with
// the Request, Decision and errors they exchange, which a host implements
// and hands to executecode.WithApprover. The broker (Broker, Config,
// Outcome and the actor messages) is the runtime's own machinery; its
// exported names exist for sibling packages and carry no compatibility
// promise.
package approval
