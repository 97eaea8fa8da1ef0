// Package mcpserve offers a Runtime's execute_code tool over the Model
// Context Protocol, with the official Go SDK: any MCP host (a desktop
// assistant, an IDE, an agent framework's MCP client) can then run scripts
// unchanged. `execute-code mcp` serves it over stdio; an embedder can
// serve the same *mcp.Server over any SDK transport.
//
// Each MCP connection is one session scope (agent "mcp"): in session mode
// its kernel persists across the connection's tools/call requests and is
// detached when the connection closes. notify() messages become progress
// notifications when the request carries a progress token, and log
// notifications otherwise. Approvals are asked with elicitation when the
// client declares it (see Approver).
package mcpserve
