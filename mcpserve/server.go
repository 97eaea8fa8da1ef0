package mcpserve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
)

// AgentID is the agent of every connection's session scope.
const AgentID = "mcp"

// Server is execute_code as an MCP server over one Runtime. The Runtime
// must have been made with WithApprover(Approver(...)) for approvals to
// reach the client.
type Server struct {
	rt  *executecode.Runtime
	srv *mcp.Server

	// base is the life of every run: Close cancels it.
	base     context.Context
	stopAll  context.CancelFunc
	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*connection
	runs     map[string]*run
	closed   bool
	watchers sync.WaitGroup
	running  sync.WaitGroup
}

// connection is one MCP connection's session: its owner, attached at its
// first call, and the end of its detach.
type connection struct {
	ready    chan struct{}
	owner    *executecode.Owner
	err      error
	detached chan struct{}
}

// New builds the MCP server of rt; version is what initialize reports.
func New(rt *executecode.Runtime, version string) *Server {
	s := &Server{rt: rt, sessions: map[*mcp.ServerSession]*connection{}, runs: map[string]*run{}}
	s.base, s.stopAll = context.WithCancel(context.Background())
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "execute-code", Version: version}, nil)
	s.srv.AddTool(&mcp.Tool{
		Name:        executecode.ToolName,
		Description: rt.Description(),
		InputSchema: executecode.Parameters(),
	}, s.call)
	return s
}

// MCP is the SDK server, for a host that connects it over a transport of
// its own (Connect, or an HTTP handler): its connections get their
// sessions the same way, and Close still detaches them.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Run serves one connection over t until it ends or ctx is done, then
// detaches its session.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ss, err := s.srv.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp connect: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = ss.Close() })
	defer stop()
	err = ss.Wait()
	s.endSession(ss)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Close ends every connection and run and waits for their sessions to
// detach.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	open := make([]*mcp.ServerSession, 0, len(s.sessions))
	for ss := range s.sessions {
		open = append(open, ss)
	}
	s.mu.Unlock()
	s.stopAll()
	for _, ss := range open {
		_ = ss.Close()
	}
	s.running.Wait()
	s.watchers.Wait()
}

// owner is the session owner of ss, attached at its first call (nil in
// per-call mode, where a connection has no kernel to keep). Every
// connection is tracked either way, so Close ends them all.
func (s *Server) owner(ctx context.Context, ss *mcp.ServerSession) (*executecode.Owner, error) {
	if ss == nil {
		return nil, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("mcp server: %w", executecode.ErrClosed)
	}
	c, ok := s.sessions[ss]
	if !ok {
		c = &connection{ready: make(chan struct{}), detached: make(chan struct{})}
		s.sessions[ss] = c
		s.watchers.Add(1)
		go s.watch(ss, c)
	}
	s.mu.Unlock()
	if !ok {
		if s.rt.Config().KernelMode == config.Session {
			// The owner is the connection's, not this request's: a first
			// call cancelled while it attaches must not leave the
			// connection without a session for good.
			c.owner, c.err = s.rt.Attach(s.base, executecode.Scope{SessionID: newID(), AgentID: AgentID})
		}
		close(c.ready)
	}
	select {
	case <-c.ready:
		return c.owner, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// watch detaches c's owner once its connection is gone.
func (s *Server) watch(ss *mcp.ServerSession, c *connection) {
	defer s.watchers.Done()
	_ = ss.Wait()
	<-c.ready
	if c.owner != nil {
		_ = c.owner.Detach(context.Background())
	}
	close(c.detached)
	s.mu.Lock()
	delete(s.sessions, ss)
	s.mu.Unlock()
}

// endSession waits for ss's session, if it had one, to be detached.
func (s *Server) endSession(ss *mcp.ServerSession) {
	s.mu.Lock()
	c, ok := s.sessions[ss]
	s.mu.Unlock()
	if ok {
		<-c.detached
	}
}

// newID is a random id, for a connection's session and a run's
// requestState.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand aborts the program instead)
	return "mcp-" + hex.EncodeToString(b[:])
}

// call is tools/call of execute_code. A tool error (bad arguments, a call
// that never ran, a failed run) is a result with isError set, as MCP
// wants, so the model sees it; only ctx ending is the SDK's business.
//
// The run outlives the request that started it when it needs an
// approval: the answer is then an input-required result carrying the
// elicitation, and the client's retry (requestState set, the user's
// answer in inputResponses) picks the same run up again. The SDK turns
// this into an inline elicitation for clients of older protocol versions.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var r *run
	if state := req.Params.RequestState; state != "" {
		s.mu.Lock()
		r = s.runs[state]
		s.mu.Unlock()
		if r == nil || r.ss != req.Session {
			return toolError(fmt.Errorf("%w: requestState names no run of this connection waiting for input", executecode.ErrBadArguments)), nil
		}
		r.follow(ctx, req)
		r.answer(req.Params.InputResponses)
	} else {
		var params map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &params); err != nil {
				return toolError(fmt.Errorf("%w: arguments are not a JSON object: %v", executecode.ErrBadArguments, err)), nil
			}
		}
		owner, err := s.owner(ctx, req.Session)
		if err != nil {
			return toolError(err), nil
		}
		if r, err = s.start(ctx, req, params, owner); err != nil {
			return toolError(err), nil
		}
	}
	return s.await(ctx, r), nil
}

// start runs one call in the background, under the server's life rather
// than its first request's.
func (s *Server) start(reqCtx context.Context, req *mcp.CallToolRequest, params map[string]any, owner *executecode.Owner) (*run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("mcp server: %w", executecode.ErrClosed)
	}
	ctx, cancel := context.WithCancel(s.base)
	r := &run{id: newID(), ss: req.Session, cancel: cancel, done: make(chan struct{}),
		asks: make(chan *ask), pending: map[string]*ask{}}
	r.follow(reqCtx, req)
	s.runs[r.id] = r
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		defer cancel()
		res, err := s.rt.ExecuteParamsTagged(ctx, params, r.notify, owner, r)
		r.res = resultOf(res, err)
		close(r.done)
		s.mu.Lock()
		delete(s.runs, r.id)
		s.mu.Unlock()
	}()
	return r, nil
}

// await waits for r's result, or for approvals it needs, which it hands
// to the client all at once. The request ending (cancelled) cancels the
// run; a request answered input-required leaves it waiting for the retry.
func (s *Server) await(ctx context.Context, r *run) *mcp.CallToolResult {
	stop := context.AfterFunc(ctx, r.cancel)
	defer stop()
	select {
	case <-r.done:
		return r.res
	case a := <-r.asks:
		if !stop() {
			// Cancelled as the approval arrived: the run ends, and the
			// approval nobody will be asked is denied.
			a.answer <- approval.Deny
			<-r.done
			return r.res
		}
		asks := mcp.InputRequestMap{}
		for ; a != nil; a = r.more() {
			r.mu.Lock()
			r.pending[a.id] = a
			r.mu.Unlock()
			asks[a.id] = a.params
		}
		return &mcp.CallToolResult{InputRequests: asks, RequestState: r.id}
	}
}

func resultOf(res executecode.Result, err error) *mcp.CallToolResult {
	if err != nil && res.Details == nil {
		return toolError(err)
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: res.Text()}},
		StructuredContent: map[string]any{
			"details": res.Details, "trust": res.Trust, "blocks": nonNil(res.Blocks),
		},
		IsError: err != nil || !res.Succeeded(),
	}
}

func toolError(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: executecode.ModelText(err)}}, IsError: true}
}

func nonNil(b []string) []string {
	if b == nil {
		return []string{}
	}
	return b
}
