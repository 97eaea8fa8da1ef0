package executecode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/executecode/executecode/mcpsource"
	"github.com/executecode/executecode/tools"
)

// MCPServer is an MCP server whose tools become helpers: each tool is
// reached as <Name>_<tool> (the tool's name with every character a python
// identifier cannot hold made an underscore), with keyword arguments
// from its input schema. The runtime starts it in New, lists its tools
// once, and stops it in Close.
type MCPServer struct {
	// Name prefixes its helpers; an ASCII python identifier.
	Name string
	// Command and Args start the server (looked up in PATH unless
	// Command holds a slash), which speaks MCP on its stdin and stdout.
	// It runs as every child of the runtime does: in a session of its
	// own, killed with the host, stopped with its whole session.
	Command string
	Args    []string
	// Env is the server's environment (nil: the host's); Dir its working
	// directory (empty: the host's).
	Env []string
	Dir string
	// Transport, instead of Command, connects to a server the host runs,
	// through any transport of the SDK. It is not restarted.
	Transport mcp.Transport
	// Trusted marks the server's results as the host's own; otherwise a
	// run that was given any of them (an error's words included) is
	// reported untrusted, as one that used webfetch is.
	Trusted bool
	// CallTimeout, when set, bounds each call of the server's tools;
	// every call is bounded by its run's deadline anyway, less a reserve
	// for the script to catch the ToolError.
	CallTimeout time.Duration
}

// ErrMCP is wrapped by New's error when an MCP server could not be
// started or listed; the message names the server.
var ErrMCP = errors.New("MCP server failed")

// WithMCP adds an MCP server as a tool source. Like WithHostTool this is
// the host's decision: the configuration's tools list cannot add or
// remove its tools, and allow, deny and require_approval govern them by
// their helper names as they govern every helper.
func WithMCP(s MCPServer) Option {
	return func(r *Runtime) { r.mcpServers = append(r.mcpServers, s) }
}

// WithMCPServer adds the MCP server started by command with args, its
// results untrusted (see WithMCP and MCPServer).
func WithMCPServer(name, command string, args ...string) Option {
	return WithMCP(MCPServer{Name: name, Command: command, Args: args})
}

// WithMCPTransport adds the MCP server reached through t, an SDK
// transport, its results untrusted (see WithMCP and MCPServer).
func WithMCPTransport(name string, t mcp.Transport) Option {
	return WithMCP(MCPServer{Name: name, Transport: t})
}

// WithStartContext bounds what New starts (the MCP servers: their start,
// initialization and tool listing) by ctx. Without a deadline of its own
// the start is bounded by DefaultStartTimeout as well.
func WithStartContext(ctx context.Context) Option {
	return func(r *Runtime) { r.startCtx = ctx }
}

// DefaultStartTimeout bounds the start of the MCP servers when the start
// context has no deadline.
const DefaultStartTimeout = 30 * time.Second

// startMCP starts the MCP servers and registers their tools as host
// tools, where the one host-tool mechanism takes over: stubs, policy,
// approvals, budgets, description and the kernel key's tool digest.
func (r *Runtime) startMCP() error {
	if len(r.mcpServers) == 0 {
		return nil
	}
	opts := mcpsource.Options{Spawner: r.spawner, Logger: r.log}
	servers := make([]mcpsource.Server, len(r.mcpServers))
	for i, s := range r.mcpServers {
		servers[i] = mcpsource.Server(s)
		if s.Command != "" && opts.Python == "" {
			// A server command is started as python's children are,
			// through python3, which a runtime without it cannot run
			// anyway.
			p, err := r.interpreter()
			if err != nil {
				return fmt.Errorf("%w %q: %w", ErrMCP, s.Name, err)
			}
			opts.Python = p
		}
	}
	ctx := r.startCtx
	if ctx == nil {
		ctx = context.Background()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	src, err := mcpsource.Start(ctx, servers, opts)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMCP, err)
	}
	from := map[string]string{}
	for _, h := range r.host {
		from[h.spec.Name] = "a host tool (WithHostTool)"
	}
	r.mcpTools = map[string]bool{}
	for _, h := range src.Helpers() {
		if other, ok := from[h.Spec.Name]; ok {
			cerr := src.Close(context.WithoutCancel(ctx))
			return errors.Join(fmt.Errorf("%w %q: its helper %s has the name of %s; rename the server", ErrMCP, h.Server, h.Spec.Name, other), cerr)
		}
		from[h.Spec.Name] = fmt.Sprintf("a tool of the MCP server %q", h.Server)
		r.host = append(r.host, hostTool{spec: h.Spec, tool: h.Tool})
		r.mcpTools[h.Spec.Name] = true
	}
	r.mcp = src
	return nil
}

// mcpPrefixed reports whether name has the prefix of one of the MCP
// servers: a name a configuration may hold before the server is listed.
func (r *Runtime) mcpPrefixed(name string) bool {
	for _, s := range r.mcpServers {
		if strings.HasPrefix(name, s.Name+"_") {
			return true
		}
	}
	return false
}

// callReserve is how much of a run's time an MCP call leaves to the
// script: a call that gets no answer fails this long before the run's
// deadline, so the script can still catch the ToolError and say what it
// has.
func callReserve(timeout time.Duration) time.Duration { return min(500*time.Millisecond, timeout/10) }

// deadlined bounds every call of an MCP tool by a deadline, the run's
// less callReserve. A session cell's helper calls carry no deadline of
// their own (the cell's server outlives a call), so the run gives one.
type deadlined struct {
	tools.Tool
	deadline time.Time
}

func (d deadlined) Execute(ctx context.Context, params map[string]any) (tools.Result, error) {
	ctx, cancel := context.WithDeadline(ctx, d.deadline)
	defer cancel()
	return d.Tool.Execute(ctx, params)
}

// Helpers are the helper names a script of this runtime can call, in the
// description's order: the enabled built-ins, then the host tools and the
// MCP servers' tools.
func (r *Runtime) Helpers() []string { return append([]string(nil), r.helpers...) }
