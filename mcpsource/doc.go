// Package mcpsource makes the tools of MCP servers into host tools: it
// starts each server the host named (a command, started through the
// runtime's proc.Spawner, or an SDK transport the host built), lists its
// tools once, and gives each one a tools.Spec and a tools.Tool, which the
// runtime registers exactly as it registers a WithHostTool tool. The
// protocol is the official Go SDK's (github.com/modelcontextprotocol/go-sdk);
// nothing here speaks JSON-RPC itself.
//
// It owns the servers' processes and sessions: a server whose process
// died is started again by the next call that needs it, a call is bounded
// by its context (a server that hangs costs the call its deadline, never
// the run), and Close stops every server, its process group and session
// included. It turns schemas into keyword arguments (names.go,
// schema.go) and results into tools.Result (result.go).
//
// It may call the SDK, tools and internal/proc; it knows nothing of the
// bridge, the policy, approvals or budgets, which the runtime applies to
// these tools as to every helper. It is the runtime's own machinery, with
// no compatibility promise.
package mcpsource
