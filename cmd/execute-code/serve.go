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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
)

// server is one `execute-code serve` session: JSON lines in, JSON lines out.
type server struct {
	rt  *executecode.Runtime
	out *lineWriter

	mu       sync.Mutex
	sessions map[string]*servedSession
	inflight sync.WaitGroup
}

// servedSession is an attached session: its owner, and the order its
// requests arrived in. Each execute is handed to the kernel's FIFO as
// soon as the one before it has its place there, so the kernel's queue
// (its depth limit, its deadlines) is what a client meets; a detach
// waits for every execute sent before it to answer.
type servedSession struct {
	agent string
	owner *executecode.Owner
	done  chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []servedItem
	closed bool
}

// servedItem is one request of the session: a cell, which calls queued
// once it has its place in the kernel's FIFO, or a barrier (a detach),
// which runs once every earlier cell has answered.
type servedItem struct {
	cell    func(queued func())
	barrier func()
}

func newServedSession(agent string, owner *executecode.Owner) *servedSession {
	ss := &servedSession{agent: agent, owner: owner, done: make(chan struct{})}
	ss.cond = sync.NewCond(&ss.mu)
	go ss.loop()
	return ss
}

// submit queues a request; false once the session is closed.
func (ss *servedSession) submit(it servedItem) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	ss.queue = append(ss.queue, it)
	ss.cond.Signal()
	return true
}

// close lets the queued requests run out and ends the loop.
func (ss *servedSession) close() {
	ss.mu.Lock()
	ss.closed = true
	ss.cond.Signal()
	ss.mu.Unlock()
}

func (ss *servedSession) loop() {
	defer close(ss.done)
	var cells sync.WaitGroup
	defer cells.Wait()
	for {
		ss.mu.Lock()
		for len(ss.queue) == 0 && !ss.closed {
			ss.cond.Wait()
		}
		if len(ss.queue) == 0 {
			ss.mu.Unlock()
			return
		}
		it := ss.queue[0]
		// The slot goes on backing the queue; cleared, it no longer keeps
		// a finished cell (its script) alive.
		ss.queue[0] = servedItem{}
		ss.queue = ss.queue[1:]
		ss.mu.Unlock()
		if it.barrier != nil {
			cells.Wait()
			it.barrier()
			continue
		}
		placed := make(chan struct{})
		cells.Add(1)
		go func() {
			defer cells.Done()
			it.cell(sync.OnceFunc(func() { close(placed) }))
		}()
		<-placed
	}
}

func (s *server) serve(ctx context.Context, in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	var scratch []byte
	for {
		if !lineBuffered(r) {
			// What the decoder answered goes out before the wait.
			s.out.flush()
		}
		line, tooLong, err := readLine(r, maxLine, &scratch)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			s.handle(ctx, line, tooLong)
		}
		if err != nil {
			break
		}
	}
	s.out.flush()
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

// handle answers one line: decoding errors at once (queued: the loop
// writes them with whatever follows, before it waits), each op by its
// own method. line is only valid until the next read.
func (s *server) handle(ctx context.Context, line []byte, tooLong bool) {
	req, err := decodeRequest(line, tooLong)
	if err != nil {
		s.out.queue(errorAnswer(req.ID, err.Error()))
		return
	}
	args, err := decodeOp(req)
	if err != nil {
		s.out.queue(errorAnswer(req.ID, err.Error()))
		return
	}
	// An op may wait on the runtime: nothing queued waits with it.
	s.out.flush()
	switch a := args.(type) {
	case attachArgs:
		s.attach(ctx, req.ID, a)
	case detachArgs:
		s.detach(req.ID, a)
	case executeArgs:
		s.execute(ctx, req.ID, a)
	case snapshotArgs:
		s.snapshot(req.ID)
	case approveArgs:
		s.approve(req.ID, a)
	}
}

func (s *server) attach(ctx context.Context, id json.RawMessage, a attachArgs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[a.Session]; ok {
		if ss.agent != a.Agent {
			s.out.send(errorAnswer(id, fmt.Sprintf("attach: session %q is attached with another agent", a.Session)))
			return
		}
		s.out.send(okLine{ID: idValue(id), OK: true})
		return
	}
	owner, err := s.rt.Attach(ctx, executecode.Scope{SessionID: a.Session, AgentID: a.Agent})
	if err != nil {
		s.out.send(errorAnswer(id, "attach: "+err.Error()))
		return
	}
	s.sessions[a.Session] = newServedSession(a.Agent, owner)
	s.out.send(okLine{ID: idValue(id), OK: true})
}

// detach takes its place in the session's FIFO: cells sent before it run
// first, then the owner goes away exactly as a dead owner would. A cell
// sent after it names a session that is no longer attached.
func (s *server) detach(id json.RawMessage, a detachArgs) {
	s.mu.Lock()
	ss, ok := s.sessions[a.Session]
	delete(s.sessions, a.Session)
	s.mu.Unlock()
	answer := func() { s.out.send(okLine{ID: idValue(id), OK: true}) }
	if !ok {
		answer()
		return
	}
	s.inflight.Add(1)
	if !ss.submit(servedItem{barrier: func() {
		defer s.inflight.Done()
		_ = ss.owner.Detach(context.Background())
		answer()
	}}) {
		s.inflight.Done()
		answer()
	}
	ss.close()
}

// execute passes the request's id on as the cell's approval tag, so that
// an approval prompt names the request that raised it.
func (s *server) execute(ctx context.Context, id json.RawMessage, a executeArgs) {
	s.mu.Lock()
	ss := s.sessions[a.Session]
	s.mu.Unlock()
	run := func(owner *executecode.Owner, queued func()) {
		defer s.inflight.Done()
		defer queued() // placed or not, the next request may go
		notify := func(msg string) { s.out.send(notifyLine{ID: idValue(id), Notify: msg}) }
		call, err := a.call()
		var res executecode.Result
		if err == nil {
			call.Notify, call.Owner, call.ApprovalTag, call.Queued = notify, owner, id, queued
			res, err = s.rt.Execute(ctx, call)
		}
		if err != nil && !stoppedByCtx(err) {
			s.out.send(errorAnswer(id, executecode.ModelText(err)))
			return
		}
		s.out.send(resultLine{ID: idValue(id), Result: res})
	}
	s.inflight.Add(1)
	if ss == nil || !ss.submit(servedItem{cell: func(queued func()) { run(ss.owner, queued) }}) {
		// No session scope: the call runs isolated (missing_session_scope).
		go run(nil, func() {})
	}
}

func (s *server) snapshot(id json.RawMessage) {
	snap, err := s.rt.Snapshot(context.Background())
	if err != nil {
		s.out.send(errorAnswer(id, "snapshot: "+err.Error()))
		return
	}
	s.out.send(snapshotLine{ID: idValue(id), Snapshot: snap})
}

// approve answers a pending approval prompt.
func (s *server) approve(id json.RawMessage, a approveArgs) {
	if err := s.rt.ResolveApproval(a.ApprovalID, a.Decision); err != nil {
		if errors.Is(err, approval.ErrNotPending) {
			s.out.send(errorAnswer(id, fmt.Sprintf("approve: approval %q is not_pending", a.ApprovalID)))
			return
		}
		s.out.send(errorAnswer(id, "approve: "+err.Error()))
		return
	}
	s.out.send(okLine{ID: idValue(id), OK: true})
}

func cmdServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet("serve")
	c.register(fs)
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics; ADDR is a loopback host:port (port 0 picks one)")
	clustered := fs.Bool("cluster", false, "be a cluster's session node: kernel nodes (execute-code node --join, or found in etcd with --etcd) run its session kernels over mutual TLS")
	var cf clusterFlags
	cf.register(fs, false)
	if err := c.parse(fs, args, stdout); err != nil {
		return exitFor(err, func(err error) int { return usageError(stderr, err) })
	}
	var extra []executecode.Option
	if *clustered {
		cc, err := cf.load(fs, c.configFile, false)
		if err != nil {
			return usageError(stderr, fmt.Errorf("--cluster: %w", err))
		}
		extra = append(extra, executecode.WithCluster(cc))
	} else if name := clusterFlagGiven(fs); name != "" {
		return usageError(stderr, fmt.Errorf("--%s is a cluster flag: give --cluster too", name))
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
	defer surviveSIGPIPE()()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := newLineWriter(stdout, cancel)
	rt, err := newRuntime(c, log, append(extra, executecode.WithApprover(serveApprover(out)))...)
	if err != nil {
		return usageError(stderr, err)
	}
	if *clustered {
		addr, err := rt.ClusterAddress(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "execute-code: --cluster: %v\n", err)
			_ = rt.Close(context.Background())
			return exitFailed
		}
		fmt.Fprintf(stderr, "execute-code serve: cluster session node listening on %s\n", addr)
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

// surviveSIGPIPE keeps a client that goes away from killing the command
// with SIGPIPE (leaving kernels and staging behind): the write fails
// instead, and the command cancels its cells and shuts down cleanly.
// Handled, not ignored, so the interpreters still start with the default
// disposition. Call the returned func to stop handling it.
func surviveSIGPIPE() (stop func()) {
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	return func() { signal.Stop(pipe) }
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
