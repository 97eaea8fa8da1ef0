package mcpsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/tools"
)

// Server is one MCP server as the host names it: a command the runtime
// starts, or a transport the host built with the SDK.
type Server struct {
	// Name prefixes the helper names of the server's tools
	// (<Name>_<tool>); it must be a usable python identifier.
	Name string
	// Command and Args start the server, which speaks MCP on its stdin and
	// stdout; Command is looked up in PATH unless it holds a slash.
	Command string
	Args    []string
	// Env is the server's environment; nil means the host's.
	Env []string
	// Dir is the server's working directory; empty means the host's.
	Dir string
	// Transport, instead of Command, connects to a server the host runs
	// (the SDK's in-memory, streamable HTTP or command transports). The
	// runtime does not restart it: a transport connects once.
	Transport mcp.Transport
	// Trusted says the server's results are the host's own: without it
	// every result and error the server words marks the run untrusted.
	Trusted bool
	// CallTimeout, when set, bounds each call of the server's tools
	// within the deadline its context already has.
	CallTimeout time.Duration
}

// Options are what Start needs of the runtime.
type Options struct {
	// Spawner starts the server commands; Python is the python3 that runs
	// Bootstrap for them and then becomes the command (proc.Command's
	// Program). Both are needed only for servers with a Command.
	Spawner *proc.Spawner
	Python  string
	// Logger gets a server's restarts and, when it dies or fails to
	// start, the tail of its stderr.
	Logger zerolog.Logger
}

// Helper is one MCP tool as a host tool: the spec its stub and the
// description are made from, and the tool the bridge dispatches to.
type Helper struct {
	Spec tools.Spec
	Tool tools.Tool
	// Server is the name of the server the tool is from.
	Server string
}

// Source is the MCP servers of one runtime, started and listed.
type Source struct {
	servers []*server
	helpers []Helper
}

// ErrBadServer is wrapped by the errors of a Server that cannot be used
// as given (its name, its command).
var ErrBadServer = errors.New("invalid MCP server")

// Start starts every server at once and lists its tools, bounded by ctx.
// A server that fails to start or list fails Start, naming the server;
// the others are stopped again, so a failed Start leaves nothing running.
func Start(ctx context.Context, servers []Server, opts Options) (*Source, error) {
	servers = slices.Clone(servers)
	if err := check(servers, opts); err != nil {
		return nil, err
	}
	src := &Source{}
	client := mcp.NewClient(&mcp.Implementation{Name: "execute-code", Version: "1"},
		&mcp.ClientOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, s := range servers {
		src.servers = append(src.servers, newServer(s, opts, client))
	}
	errs := make([]error, len(src.servers))
	lists := make([][]*mcp.Tool, len(src.servers))
	var wg sync.WaitGroup
	for i, s := range src.servers {
		wg.Go(func() { lists[i], errs[i] = s.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, src.closeAfterFailure(ctx))
	}
	for i, s := range src.servers {
		hs, err := s.helpers(lists[i])
		if err != nil {
			return nil, errors.Join(err, src.closeAfterFailure(ctx))
		}
		src.helpers = append(src.helpers, hs...)
	}
	return src, nil
}

// check refuses a server list that could not work, before anything
// starts, and resolves each command in PATH (the launch execs a path).
func check(servers []Server, opts Options) error {
	var names []string
	for i := range servers {
		s := &servers[i]
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w %q: %s", ErrBadServer, s.Name, fmt.Sprintf(format, a...))
		}
		switch {
		case !tools.UsableParam(s.Name):
			return bad("the name must be an ASCII python identifier, not a keyword, without a leading underscore")
		case slices.Contains(names, s.Name):
			return bad("named twice")
		case (s.Command == "") == (s.Transport == nil):
			return bad("give either a command or a transport")
		case s.Command != "" && (opts.Spawner == nil || opts.Python == ""):
			return bad("starting a command needs the runtime's spawner and python3")
		}
		if s.Command != "" {
			p, err := exec.LookPath(s.Command)
			if err == nil {
				p, err = filepath.Abs(p)
			}
			if err != nil {
				return bad("command %q: %v", s.Command, err)
			}
			s.Command = p
		}
		names = append(names, s.Name)
	}
	return nil
}

// closeAfterFailure stops what a failed Start started, even when its ctx
// ended: the stop's own graces bound it.
func (s *Source) closeAfterFailure(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exitGrace+termGrace+5*time.Second)
	defer cancel()
	return s.Close(ctx)
}

// Helpers are the servers' tools, server by server in the order given,
// each server's in the order it listed them.
func (s *Source) Helpers() []Helper { return slices.Clone(s.helpers) }

// Close stops every server at once, bounded by ctx: a server's command is
// asked to exit by the end of its input, then terminated, then killed,
// with its whole session, and calls still waiting for it end.
func (s *Source) Close(ctx context.Context) error {
	errs := make([]error, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		wg.Go(func() { errs[i] = srv.close(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// helpers makes the helpers of one server's listed tools.
func (s *server) helpers(list []*mcp.Tool) ([]Helper, error) {
	names := make([]string, len(list))
	for i, t := range list {
		names[i] = t.Name
	}
	bare := assign(names, identifierPart, nil)
	var out []Helper
	seen := map[string]bool{}
	for _, t := range list {
		if seen[t.Name] {
			// A name listed twice is one tool.
			continue
		}
		seen[t.Name] = true
		name := s.cfg.Name + "_" + bare[t.Name]
		sig, err := signatureOf(name, oneLine(t.Description, "Tool "+t.Name+" of the MCP server "+s.cfg.Name+"."), t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: tool %q: %w", s.cfg.Name, t.Name, err)
		}
		out = append(out, Helper{Spec: sig.spec, Tool: &helperTool{srv: s, tool: t.Name, sig: sig}, Server: s.cfg.Name})
	}
	return out, nil
}

// helperTool is one MCP tool as a tools.Tool.
type helperTool struct {
	srv  *server
	tool string
	sig  signature
}

func (h *helperTool) Name() string { return h.sig.spec.Name }

func (h *helperTool) Execute(ctx context.Context, params map[string]any) (tools.Result, error) {
	args, err := h.sig.arguments(params)
	if err != nil {
		return tools.Result{}, err
	}
	res, err := h.srv.call(ctx, h.sig.spec.Name, h.tool, args)
	if err != nil {
		return tools.Result{}, err
	}
	return resultOf(h.sig.spec.Name, res, !h.srv.cfg.Trusted)
}
