package mcpsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proc"
)

// How a server's command is stopped: the end of its input first (what the
// MCP stdio transport asks of a client), then SIGTERM, then SIGKILL, each
// to its whole process group.
const (
	exitGrace = 2 * time.Second
	termGrace = time.Second
)

// stderrTail is how much of a server's stderr is kept for the log.
const stderrTail = 2048

// server is one MCP server: its configuration and its current connection,
// which a call after a death replaces.
type server struct {
	cfg    Server
	opts   Options
	client *mcp.Client
	// sem is held while the connection is looked at or replaced, so one
	// restart runs at a time and a waiting call still obeys its context.
	sem chan struct{}
	cur *conn // guarded by sem

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup // calls in flight, counted under mu
}

// conn is one session with a server, and the process behind it when the
// runtime started one.
type conn struct {
	sess   *mcp.ClientSession
	proc   *proc.Process
	stderr *proc.TailBuffer
	// done is closed once the session ended: the server exited or closed
	// its side, or the session was closed.
	done  chan struct{}
	waits sync.WaitGroup
}

func newServer(cfg Server, opts Options, client *mcp.Client) *server {
	return &server{cfg: cfg, opts: opts, client: client, sem: make(chan struct{}, 1)}
}

// start connects and lists the tools.
func (s *server) start(ctx context.Context) ([]*mcp.Tool, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: start: %w", s.cfg.Name, err)
	}
	s.cur = c
	var list []*mcp.Tool
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: list tools: %w%s", s.cfg.Name, err, c.stderrNote())
		}
		list = append(list, t)
	}
	return list, nil
}

// connect starts the server's command (or opens its transport) and
// initializes a session, bounded by ctx. A failure leaves no process.
func (s *server) connect(ctx context.Context) (*conn, error) {
	c := &conn{done: make(chan struct{})}
	transport := s.cfg.Transport
	if transport == nil {
		t, err := c.spawn(ctx, s.cfg, s.opts)
		if err != nil {
			return nil, err
		}
		transport = t
	}
	sess, err := s.client.Connect(ctx, transport, nil)
	if err != nil {
		c.kill()
		return nil, fmt.Errorf("initialize: %w%s", err, c.stderrNote())
	}
	c.sess = sess
	c.waits.Go(func() {
		_ = sess.Wait()
		close(c.done)
	})
	return c, nil
}

// spawn starts the command through the runtime's Spawner, as every child
// of the runtime is started (its own session, the parent-death signal,
// the guard), and returns the SDK transport over its stdin and stdout.
// The stdout reader ends once the process is gone, so the session sees
// the end of the stream however the server ended.
func (c *conn) spawn(ctx context.Context, cfg Server, opts Options) (mcp.Transport, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	pr, pw := io.Pipe()
	c.stderr = proc.NewTailBuffer(stderrTail)
	p, err := opts.Spawner.Start(ctx, proc.Command{
		Path: opts.Python, Program: cfg.Command, Args: cfg.Args, Dir: cfg.Dir, Env: cfg.Env,
		Stdin: stdinR, Output: pw, Stderr: c.stderr,
	})
	stdinR.Close()
	if err != nil {
		stdinW.Close()
		pr.Close()
		return nil, err
	}
	c.proc = p
	c.waits.Go(func() {
		<-p.Done()
		pw.Close()
	})
	return &mcp.IOTransport{Reader: pr, Writer: stdinW}, nil
}

// kill ends a connection at once: one that never became a session, or
// one whose session already ended.
func (c *conn) kill() {
	if c.sess != nil {
		// Counted with the other waits: it returns once the process is
		// gone and its output ended.
		c.waits.Go(func() { _ = c.sess.Close() })
	}
	if c.proc != nil {
		c.proc.Kill()
		<-c.proc.Done()
	}
	c.waits.Wait()
}

// stderrNote is the tail of the server's stderr, for an error of the
// host's log: the first thing to read when a server does not start.
func (c *conn) stderrNote() string {
	if tail := c.stderrTail(); tail != "" {
		return " (stderr: " + tail + ")"
	}
	return ""
}

// exit describes how the server's process ended, once it has.
func (c *conn) exit() string {
	if c.proc == nil {
		return "closed its connection"
	}
	select {
	case <-c.proc.Done():
	default:
		return "broke the connection (its output ended or was not MCP)"
	}
	st := c.proc.Exit()
	if st.Signaled {
		return "was killed by " + unix.SignalName(st.Signal)
	}
	return fmt.Sprintf("exited with status %d", st.Code)
}

// stop closes the session and ends the process: the end of its input,
// then SIGTERM and SIGKILL to its group, each after a grace.
func (c *conn) stop(ctx context.Context) error {
	closed := make(chan struct{})
	go func() {
		_ = c.sess.Close()
		close(closed)
	}()
	if c.proc != nil {
		if !within(ctx, c.proc.Done(), exitGrace) {
			c.proc.Signal(syscall.SIGTERM)
			if !within(ctx, c.proc.Done(), termGrace) {
				c.proc.Kill()
				<-c.proc.Done()
			}
		}
	}
	select {
	case <-closed:
	case <-ctx.Done():
		return fmt.Errorf("close session: %w", ctx.Err())
	}
	c.waits.Wait()
	return nil
}

// within waits up to d for ch; false when d passed or ctx ended first.
func within(ctx context.Context, ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// live is the current connection, a new one when the last ended (a
// command only: a transport connects once).
func (s *server) live(ctx context.Context, helper string) (*conn, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w: server %q was still being started again when the call's deadline came", helper, ErrNoAnswer, s.cfg.Name)
	}
	defer func() { <-s.sem }()
	if s.isClosed() {
		return nil, fmt.Errorf("%s: %w", helper, ErrClosed)
	}
	old := s.cur
	if old != nil && !isClosed(old.done) {
		return old, nil
	}
	if s.cfg.Transport != nil {
		return nil, fmt.Errorf("%s: %w: server %q closed its connection", helper, ErrServerGone, s.cfg.Name)
	}
	if old != nil {
		s.opts.Logger.Warn().Str("server", s.cfg.Name).Str("ended", old.exit()).Str("stderr", old.stderrTail()).
			Msg("execute_code mcp server ended; starting it again")
		old.kill()
		s.cur = nil
	}
	c, err := s.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: server %q could not be started again: %w", helper, ErrServerGone, s.cfg.Name, err)
	}
	s.cur = c
	return c, nil
}

func (c *conn) stderrTail() string {
	if c.stderr == nil {
		return ""
	}
	return strings.TrimSpace(c.stderr.String())
}

func (s *server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track counts a call in flight, unless the server is closed.
func (s *server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.calls.Add(1)
	return true
}

type answer struct {
	res *mcp.CallToolResult
	err error
}

// call calls tool with args on the live connection. It returns when the
// answer comes, when ctx ends (the SDK then tells the server the call is
// cancelled) or when the server's connection ends, whichever is first:
// a server that hangs, even one that stopped reading its input, costs
// the call its deadline and no more.
func (s *server) call(ctx context.Context, helper, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	if s.cfg.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.CallTimeout)
		defer cancel()
	}
	if ctx.Err() != nil {
		return nil, s.noAnswer(ctx, helper, tool)
	}
	c, err := s.live(ctx, helper)
	if err != nil {
		return nil, err
	}
	if !s.track() {
		return nil, fmt.Errorf("%s: %w", helper, ErrClosed)
	}
	ch := make(chan answer, 1)
	go func() {
		defer s.calls.Done()
		res, err := c.sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		ch <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		select {
		case a = <-ch:
		default:
			return nil, s.noAnswer(ctx, helper, tool)
		}
	case <-c.done:
		select {
		case a = <-ch:
		case <-time.After(10 * time.Millisecond):
			// The answer, if the server sent one before it went, is read
			// before the session ends: none came.
			return nil, s.gone(c, helper)
		}
	}
	switch {
	case a.err == nil:
		return a.res, nil
	case ctx.Err() != nil:
		return nil, s.noAnswer(ctx, helper, tool)
	case isClosed(c.done) || errors.Is(a.err, mcp.ErrConnectionClosed) || errors.Is(a.err, io.EOF) || errors.Is(a.err, io.ErrClosedPipe):
		<-c.done
		return nil, s.gone(c, helper)
	}
	var wire *jsonrpc.Error
	if errors.As(a.err, &wire) {
		// An error response: the server's own words.
		return nil, serverError(helper, wire.Message, !s.cfg.Trusted)
	}
	// What the server sent could not be read (not JSON-RPC, say): the
	// session is ending, which its next call sees.
	if within(ctx, c.done, 100*time.Millisecond) {
		return nil, s.gone(c, helper)
	}
	return nil, serverError(helper, "the MCP server's answer could not be used: "+a.err.Error(), !s.cfg.Trusted)
}

func (s *server) noAnswer(ctx context.Context, helper, tool string) error {
	why := "the call was cancelled"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "no answer came before the call's deadline"
	}
	return fmt.Errorf("%s: %w: server %q, tool %q: %s", helper, ErrNoAnswer, s.cfg.Name, tool, why)
}

func (s *server) gone(c *conn, helper string) error {
	if c.proc == nil {
		return fmt.Errorf("%s: %w: server %q %s during the call", helper, ErrServerGone, s.cfg.Name, c.exit())
	}
	// Its exit status says more than a broken stream, once it is in.
	within(context.Background(), c.proc.Done(), time.Second)
	return fmt.Errorf("%s: %w: server %q %s during the call; its next call starts it again", helper, ErrServerGone, s.cfg.Name, c.exit())
}

// close stops the server for good, bounded by ctx, and waits for the
// calls still in flight, which the end of the connection ends.
func (s *server) close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var err error
	select {
	case s.sem <- struct{}{}:
		c := s.cur
		s.cur = nil
		<-s.sem
		if c != nil {
			err = c.stop(ctx)
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	done := make(chan struct{})
	go func() {
		s.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("calls still waiting: %w", ctx.Err()))
	}
	if err != nil {
		return fmt.Errorf("mcp server %q: stop: %w", s.cfg.Name, err)
	}
	return nil
}
