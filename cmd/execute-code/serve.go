package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
)

// maxLine bounds one request line; a longer line is answered with an error
// and skipped, so a runaway client cannot make the server buffer without
// limit.
const maxLine = 16 << 20

// server is one `execute-code serve` session: JSON lines in, JSON lines out.
type server struct {
	rt  *executecode.Runtime
	out *lineWriter

	mu       sync.Mutex
	sessions map[string]*servedSession
	inflight sync.WaitGroup
}

// servedSession is an attached session: its owner, and the FIFO its cells
// run in, one at a time, in the order they arrived.
type servedSession struct {
	agent string
	owner *executecode.Owner
	done  chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []func()
	closed bool
}

func newServedSession(agent string, owner *executecode.Owner) *servedSession {
	ss := &servedSession{agent: agent, owner: owner, done: make(chan struct{})}
	ss.cond = sync.NewCond(&ss.mu)
	go ss.loop()
	return ss
}

// submit queues a cell; false once the session is closed.
func (ss *servedSession) submit(cell func()) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	ss.queue = append(ss.queue, cell)
	ss.cond.Signal()
	return true
}

// close lets the queued cells run out and ends the loop.
func (ss *servedSession) close() {
	ss.mu.Lock()
	ss.closed = true
	ss.cond.Signal()
	ss.mu.Unlock()
}

func (ss *servedSession) loop() {
	defer close(ss.done)
	for {
		ss.mu.Lock()
		for len(ss.queue) == 0 && !ss.closed {
			ss.cond.Wait()
		}
		if len(ss.queue) == 0 {
			ss.mu.Unlock()
			return
		}
		cell := ss.queue[0]
		ss.queue = ss.queue[1:]
		ss.mu.Unlock()
		cell()
	}
}

// lineWriter writes whole JSON lines from many goroutines. The first
// failed write (the client went away) calls broken once.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken func()
	failed bool
}

func (l *lineWriter) send(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		fmt.Fprintf(&buf, "{\"error\":%q}\n", "cannot encode answer: "+err.Error())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed {
		return
	}
	if _, err := l.w.Write(buf.Bytes()); err != nil {
		l.failed = true
		if l.broken != nil {
			l.broken()
		}
	}
}

// request is one decoded line. Fields are raw so that a wrong type can be
// named precisely.
type request struct {
	ID  json.RawMessage `json:"id"`
	Op  string          `json:"op"`
	raw map[string]json.RawMessage
}

func (s *server) serve(ctx context.Context, in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			s.handle(ctx, line, tooLong)
		}
		if err != nil {
			break
		}
	}
	// End of input: cells already sent finish within their own timeouts,
	// then every session detaches.
	s.inflight.Wait()
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*servedSession{}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.close()
		<-ss.done
		_ = ss.owner.Detach(context.Background())
	}
}

// readLine reads one line of at most maxLine bytes; a longer one is
// consumed to its end and reported as too long.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			tooLong = true
			buf = buf[:0]
		} else if !tooLong {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
}

func (s *server) handle(ctx context.Context, line []byte, tooLong bool) {
	if tooLong {
		s.out.send(errorAnswer(nil, fmt.Sprintf("request line longer than %d bytes", maxLine)))
		return
	}
	if !utf8.Valid(line) {
		s.out.send(errorAnswer(nil, "request line is not valid UTF-8"))
		return
	}
	var req request
	if err := json.Unmarshal(line, &req.raw); err != nil {
		s.out.send(errorAnswer(nil, "request is not a JSON object: "+err.Error()))
		return
	}
	req.ID = req.raw["id"]
	if op, ok := req.raw["op"]; !ok || json.Unmarshal(op, &req.Op) != nil {
		s.out.send(errorAnswer(req.ID, `field "op" must be a string`))
		return
	}
	switch req.Op {
	case "attach":
		s.attach(req)
	case "detach":
		s.detach(req)
	case "execute":
		s.execute(ctx, req)
	case "snapshot":
		s.snapshot(req)
	case "approve":
		s.approve(req)
	default:
		s.out.send(errorAnswer(req.ID, fmt.Sprintf("unknown op %q", req.Op)))
	}
}

func errorAnswer(id json.RawMessage, msg string) map[string]any {
	return map[string]any{"id": idValue(id), "error": msg}
}

func idValue(id json.RawMessage) any {
	if len(id) == 0 {
		return nil
	}
	return id
}

// field decodes an optional field into v; a present field of the wrong
// type is an error naming it.
func (req request) field(name string, v any, required bool) error {
	raw, ok := req.raw[name]
	if !ok || string(raw) == "null" {
		if required {
			return fmt.Errorf("%s: missing field %q", req.Op, name)
		}
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: field %q has the wrong type", req.Op, name)
	}
	return nil
}

func (s *server) attach(req request) {
	var session, agent string
	if err := errors.Join(req.field("session", &session, true), req.field("agent", &agent, true)); err != nil {
		s.out.send(errorAnswer(req.ID, err.Error()))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[session]; ok {
		if ss.agent != agent {
			s.out.send(errorAnswer(req.ID, fmt.Sprintf("attach: session %q is attached with another agent", session)))
			return
		}
		s.out.send(map[string]any{"id": idValue(req.ID), "ok": true})
		return
	}
	owner, err := s.rt.Attach(executecode.Scope{SessionID: session, AgentID: agent})
	if err != nil {
		s.out.send(errorAnswer(req.ID, "attach: "+err.Error()))
		return
	}
	s.sessions[session] = newServedSession(agent, owner)
	s.out.send(map[string]any{"id": idValue(req.ID), "ok": true})
}

// detach takes its place in the session's FIFO: cells sent before it run
// first, then the owner goes away exactly as a dead owner would. A cell
// sent after it names a session that is no longer attached.
func (s *server) detach(req request) {
	var session string
	if err := req.field("session", &session, true); err != nil {
		s.out.send(errorAnswer(req.ID, err.Error()))
		return
	}
	s.mu.Lock()
	ss, ok := s.sessions[session]
	delete(s.sessions, session)
	s.mu.Unlock()
	answer := func() { s.out.send(map[string]any{"id": idValue(req.ID), "ok": true}) }
	if !ok {
		answer()
		return
	}
	s.inflight.Add(1)
	if !ss.submit(func() {
		defer s.inflight.Done()
		_ = ss.owner.Detach(context.Background())
		answer()
	}) {
		s.inflight.Done()
		answer()
	}
	ss.close()
}

func (s *server) execute(ctx context.Context, req request) {
	var session, script string
	var timeout int
	var reset bool
	err := errors.Join(req.field("session", &session, false), req.field("script", &script, true),
		req.field("timeout_ms", &timeout, false), req.field("reset", &reset, false))
	if err != nil {
		s.out.send(errorAnswer(req.ID, err.Error()))
		return
	}
	params := map[string]any{"script": script, "reset": reset}
	if timeout != 0 {
		params["timeout_ms"] = timeout
	}
	s.mu.Lock()
	ss := s.sessions[session]
	s.mu.Unlock()
	run := func(owner *executecode.Owner) {
		defer s.inflight.Done()
		notify := func(msg string) { s.out.send(map[string]any{"id": idValue(req.ID), "notify": msg}) }
		res, err := s.rt.ExecuteParamsTagged(ctx, params, notify, owner, req.ID)
		if err != nil {
			s.out.send(errorAnswer(req.ID, err.Error()))
			return
		}
		s.out.send(map[string]any{"id": idValue(req.ID), "result": res})
	}
	s.inflight.Add(1)
	if ss == nil || !ss.submit(func() { run(ss.owner) }) {
		// No session scope: the call runs isolated (missing_session_scope).
		go run(nil)
	}
}

func (s *server) snapshot(req request) {
	snap, err := s.rt.Snapshot(context.Background())
	if err != nil {
		s.out.send(errorAnswer(req.ID, "snapshot: "+err.Error()))
		return
	}
	s.out.send(map[string]any{"id": idValue(req.ID), "snapshot": snap})
}

// approve answers a pending approval prompt: allow (= approve_once),
// approve_session, approve_agent, approve_global or deny.
func (s *server) approve(req request) {
	var id, decision string
	if err := errors.Join(req.field("approval_id", &id, true), req.field("decision", &decision, true)); err != nil {
		s.out.send(errorAnswer(req.ID, err.Error()))
		return
	}
	d, err := approval.ParseDecision(decision)
	if err != nil {
		s.out.send(errorAnswer(req.ID, fmt.Sprintf("approve: field \"decision\": %v", err)))
		return
	}
	if err := s.rt.ResolveApproval(id, d); err != nil {
		if errors.Is(err, approval.ErrNotPending) {
			s.out.send(errorAnswer(req.ID, fmt.Sprintf("approve: approval %q is not_pending", id)))
			return
		}
		s.out.send(errorAnswer(req.ID, "approve: "+err.Error()))
		return
	}
	s.out.send(map[string]any{"id": idValue(req.ID), "ok": true})
}

func cmdServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet("serve")
	c.register(fs)
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics; ADDR is a loopback host:port (port 0 picks one)")
	if err := c.parse(fs, args); err != nil {
		return usageError(stderr, err)
	}
	if err := checkLoopback(*metricsAddr); err != nil {
		fmt.Fprintf(stderr, "execute-code: --metrics-addr: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "execute-code: serve takes no arguments, got %q\n", fs.Arg(0))
		return exitUsage
	}
	// serve exists to drive sessions: session mode unless asked otherwise.
	if c.mode == "" {
		c.mode = string(config.Session)
	}
	log := warnLogger(stderr)
	// A client that goes away must not kill serve with SIGPIPE (leaving
	// kernels and staging behind): the write fails instead, and serve
	// cancels its cells and shuts down cleanly. Handled, not ignored, so
	// the interpreters still start with the default disposition.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &lineWriter{w: stdout, broken: cancel}
	rt, err := newRuntime(c, log, executecode.WithApprover(serveApprover(out)))
	if err != nil {
		return usageError(stderr, err)
	}
	var metrics *metricsServer
	if *metricsAddr != "" {
		metrics, err = startMetrics(*metricsAddr, rt)
		if err != nil {
			fmt.Fprintf(stderr, "execute-code: --metrics-addr: %v\n", err)
			_ = rt.Close(context.Background())
			return exitUsage
		}
		fmt.Fprintf(stderr, "execute-code serve: metrics at http://%s/metrics\n", metrics.addr)
	}
	s := &server{rt: rt, out: out, sessions: map[string]*servedSession{}}
	s.serve(ctx, stdin)
	if err := rt.Close(context.Background()); err != nil {
		log.Warn().Err(err).Msg("execute-code serve: shutdown")
	}
	metrics.stop()
	return exitOK
}

// metricsServer serves the runtime's Prometheus metrics over plain HTTP.
type metricsServer struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

// checkLoopback accepts "" (no metrics) or a host:port whose host is a
// loopback address or localhost: the endpoint has no authentication, so
// exposing it beyond the machine is the embedder's decision, not a flag's.
func checkLoopback(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", host)
	}
	return nil
}

func startMetrics(addr string, rt *executecode.Runtime) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(rt.Metrics()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{addr: ln.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// stop closes the listener and waits for scrapes in progress (bounded).
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}
