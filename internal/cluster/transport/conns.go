package transport

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// errStopped is what a dial or a stream meets once the transport stops.
var errStopped = errors.New("transport stopped")

// dialer makes every connection a node dials, and keeps them, so Stop can
// close those a frozen peer holds up.
type dialer struct {
	mu     sync.Mutex
	closed bool
	conns  map[*dialedConn]struct{}
}

func newDialer() *dialer { return &dialer{conns: map[*dialedConn]struct{}{}} }

type dialedConn struct {
	net.Conn
	d    *dialer
	once sync.Once
}

func (c *dialedConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}

func (d *dialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, errStopped
	}
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &dialedConn{Conn: raw, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		raw.Close()
		return nil, errStopped
	}
	d.conns[c] = struct{}{}
	return c, nil
}

// closeAll closes every connection and refuses new ones.
func (d *dialer) closeAll() {
	d.mu.Lock()
	d.closed = true
	conns := make([]*dialedConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// inbound counts what peers' streams run on this node: every stream
// handler and the goroutines it starts, so Stop ends only after them, and
// every remote reader outside its receive, so Stop can wait until none
// is. The library's reader reads an unsynchronized flag after every
// message it receives, and its stop writes that flag: parked, readers
// are inside a receive that delivers nothing more, ordered before the
// write.
type inbound struct {
	mu       sync.Mutex
	stopping bool
	stopCh   chan struct{}
	active   int // handlers and their goroutines
	out      int // remote readers holding a message
	changed  chan struct{}
}

func newInbound() *inbound {
	return &inbound{stopCh: make(chan struct{}), changed: make(chan struct{})}
}

// notifyLocked wakes every waiter; the caller holds mu.
func (in *inbound) notifyLocked() {
	close(in.changed)
	in.changed = make(chan struct{})
}

// enter counts a handler or goroutine in, unless the node is stopping.
func (in *inbound) enter() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopping {
		return false
	}
	in.active++
	return true
}

func (in *inbound) leave() {
	in.mu.Lock()
	in.active--
	in.notifyLocked()
	in.mu.Unlock()
}

// goCounted runs fn on a goroutine Stop waits for; false when stopping.
func (in *inbound) goCounted(fn func()) bool {
	if !in.enter() {
		return false
	}
	go func() {
		defer in.leave()
		fn()
	}()
	return true
}

// park stops inbound delivery: liveness handlers return, and remote
// readers drop every message they receive from now on; it returns once
// no reader holds one it received before, or when forced.
func (in *inbound) park(forced <-chan struct{}) {
	in.mu.Lock()
	if !in.stopping {
		in.stopping = true
		close(in.stopCh)
	}
	for in.out > 0 {
		ch := in.changed
		in.mu.Unlock()
		select {
		case <-ch:
		case <-forced:
			return
		}
		in.mu.Lock()
	}
	in.mu.Unlock()
}

// wait returns once every handler and goroutine has ended.
func (in *inbound) wait() {
	in.mu.Lock()
	for in.active > 0 {
		ch := in.changed
		in.mu.Unlock()
		<-ch
		in.mu.Lock()
	}
	in.mu.Unlock()
}

// serveRemote runs the library's stream handler on a filtered stream.
func (in *inbound) serveRemote(ss grpc.ServerStream, srv *served, handler func(grpc.ServerStream) error) error {
	if !in.enter() {
		return status.Error(codes.Unavailable, "node stopping")
	}
	defer in.leave()
	fs := &filteredStream{ServerStream: ss, in: in, srv: srv}
	fs.setOut(true)
	defer fs.setOut(false)
	return handler(fs)
}

// filteredStream checks every message of the remote's stream before the
// library decodes its payloads: a type it does not link would crash the
// process in its deserializer, and an index out of a batch's tables
// would panic in its handler.
type filteredStream struct {
	grpc.ServerStream
	in  *inbound
	srv *served
	out bool // guarded by in.mu
}

func (s *filteredStream) setOut(out bool) {
	s.in.mu.Lock()
	defer s.in.mu.Unlock()
	if s.out == out {
		return
	}
	s.out = out
	if out {
		s.in.out++
	} else {
		s.in.out--
		s.in.notifyLocked()
	}
}

func (s *filteredStream) RecvMsg(m any) error {
	s.setOut(false)
	var err error
	for {
		if err := s.ServerStream.RecvMsg(m); err != nil {
			return err
		}
		err = checkMessage(m)
		s.in.mu.Lock()
		if !s.in.stopping {
			break
		}
		s.in.mu.Unlock()
		// Stopping, the message is dropped and the next one read, so a
		// peer busy sending here finishes, reads the library's goodbye
		// and closes the stream; an error now would close the reader's
		// channel, on which the library's stop may still send.
	}
	if err != nil {
		s.in.mu.Unlock()
		return err
	}
	s.out = true
	s.in.out++
	s.in.mu.Unlock()
	if rm, ok := m.(*remote.RemoteMessage); ok && rm.GetConnectRequest().GetServerConnection() != nil {
		c := rm.GetConnectRequest().GetServerConnection()
		if p, ok := grpcpeer.FromContext(s.Context()); ok && p.Addr != nil {
			s.srv.claim(p.Addr.String(), c.GetAddress())
		}
	}
	return nil
}

// served keeps every connection peers made to this node, by the address
// each peer's remote announced on it, so the node can close a peer's
// connections when it sees the peer gone.
type served struct {
	mu    sync.Mutex
	conns map[string]*servedConn // by remote address
}

func newServed() *served { return &served{conns: map[string]*servedConn{}} }

type servedConn struct {
	net.Conn
	s       *served
	node    string // the peer's announced address; guarded by s.mu
	removed bool   // guarded by s.mu
}

func (c *servedConn) Close() error {
	c.s.mu.Lock()
	if !c.removed {
		c.removed = true
		delete(c.s.conns, c.RemoteAddr().String())
	}
	c.s.mu.Unlock()
	return c.Conn.Close()
}

func (s *served) add(conn net.Conn) net.Conn {
	c := &servedConn{Conn: conn, s: s}
	s.mu.Lock()
	s.conns[conn.RemoteAddr().String()] = c
	s.mu.Unlock()
	return c
}

// claim records that the connection from remote carries the remote
// stream of the node at node.
func (s *served) claim(remote, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[remote]; ok {
		c.node = node
	}
}

// sever closes every connection the node at node made here.
func (s *served) sever(node string) {
	var conns []*servedConn
	s.mu.Lock()
	for _, c := range s.conns {
		if c.node == node {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// serverCreds is the node's server TLS, keeping every connection it
// accepts in served.
type serverCreds struct {
	credentials.TransportCredentials
	s *served
}

func (c serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return c.s.add(conn), info, nil
}

func (c serverCreds) Clone() credentials.TransportCredentials {
	return serverCreds{c.TransportCredentials.Clone(), c.s}
}
