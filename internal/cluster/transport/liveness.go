package transport

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// The liveness check (docs/cluster.md, Frozen peers): a node pings every
// peer it talks to on a stream of its own, beside the remote's, over the
// same port and mutual TLS. A ping is an envelope of pingKind whose seq
// the peer echoes in a pongKind envelope; neither has an incarnation or
// a payload, and neither may travel in the remote's batches. Its own
// stream and connection keep a ping from queueing behind the up to
// 48 MiB the endpoint writer may be sending, which on a slow link would
// make a busy peer look frozen.
const (
	pingKind       = "transport.ping"
	pongKind       = "transport.pong"
	livenessMethod = "/executecode.cluster.Liveness/Ping"
	// maxPingRate bounds the pings one stream gets answered, twice what
	// the shortest interval sends: a peer that pings faster has its
	// stream closed, so pinging costs a node at most this much work.
	maxPingRate = 2 * float64(time.Second/MinLivenessInterval)
)

var livenessStream = &grpc.StreamDesc{StreamName: "Ping", ServerStreams: true, ClientStreams: true}

// checkPing admits a ping: its kind, and nothing but a seq.
func checkPing(env *wire.Envelope) error {
	if env.GetKind() != pingKind || env.GetIncarnation() != "" || len(env.GetPayload()) != 0 {
		return errors.New("not a ping")
	}
	return nil
}

// answerPings serves a peer's liveness stream: each ping answered at
// once, from this handler, never through an actor.
func (t *Transport) answerPings(ss grpc.ServerStream) error {
	pings := make(chan *wire.Envelope)
	ended := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	// The receive cannot be interrupted: it runs apart, so the handler
	// can return when the node stops, which ends the stream and it.
	if !t.in.goCounted(func() {
		for {
			env := new(wire.Envelope)
			if err := ss.RecvMsg(env); err != nil {
				ended <- err
				return
			}
			select {
			case pings <- env:
			case <-done:
				return
			}
		}
	}) {
		return status.Error(codes.Unavailable, "node stopping")
	}
	limit := rate.NewLimiter(rate.Limit(maxPingRate), int(maxPingRate))
	for {
		select {
		case <-t.in.stopCh:
			return status.Error(codes.Unavailable, "node stopping")
		case err := <-ended:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case env := <-pings:
			if err := checkPing(env); err != nil {
				return status.Error(codes.PermissionDenied, "message refused: "+err.Error())
			}
			if !limit.Allow() {
				return status.Error(codes.ResourceExhausted, "pings too often")
			}
			if err := ss.SendMsg(&wire.Envelope{Kind: pongKind, Seq: env.GetSeq()}); err != nil {
				return err
			}
		}
	}
}

// liveness pings the peers this node sends to and judges them.
type liveness struct {
	t                 *Transport
	dial              []grpc.DialOption
	interval, timeout time.Duration
	// goneFor is how long a peer seen gone is still pinged, so that its
	// answer lifts the quarantine; then it is forgotten.
	goneFor time.Duration
	epoch   time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	peers   map[string]*peer
	// fast is peers by address for the send path, which must not take mu.
	fast sync.Map
}

// peer is one address this node talks to.
type peer struct {
	addr   string
	conn   *grpc.ClientConn
	ctx    context.Context
	cancel context.CancelFunc

	sent  atomic.Uint64 // the last ping's seq
	heard atomic.Int64  // since epoch, the last answer (or the start)
	gone  atomic.Bool   // seen gone: sends refused until it answers

	// Guarded by liveness.mu.
	goneSeq uint64 // only an answer to a later ping lifts gone
	goneAt  time.Duration
}

func newLiveness(t *Transport, dial []grpc.DialOption) *liveness {
	ctx, cancel := context.WithCancel(context.Background())
	// A peer seen gone is dialed again every interval, not after gRPC's
	// backoff of up to two minutes: its answer is what lifts its
	// quarantine.
	dial = append(slices.Clip(dial), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: t.cfg.LivenessInterval, Multiplier: 1, Jitter: 0.2, MaxDelay: t.cfg.LivenessInterval},
		MinConnectTimeout: t.cfg.LivenessTimeout,
	}))
	return &liveness{
		t: t, dial: dial,
		interval: t.cfg.LivenessInterval, timeout: t.cfg.LivenessTimeout,
		goneFor: max(time.Minute, 10*t.cfg.LivenessTimeout),
		epoch:   time.Now(),
		ctx:     ctx, cancel: cancel,
		peers: map[string]*peer{},
	}
}

func (l *liveness) now() time.Duration { return time.Since(l.epoch) }

func (l *liveness) start() {
	l.wg.Add(1)
	go l.judge()
}

// stop ends every ping and the judge, and closes their connections.
func (l *liveness) stop() {
	l.mu.Lock()
	l.stopped = true
	peers := l.peers
	l.peers = map[string]*peer{}
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	for _, p := range peers {
		p.conn.Close()
		l.fast.Delete(p.addr)
	}
}

// admit says whether a local send to addr may go: it starts pinging an
// address it has not met, and refuses one seen gone.
func (l *liveness) admit(addr string) bool {
	if v, ok := l.fast.Load(addr); ok {
		return !v.(*peer).gone.Load()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.peers[addr]; ok {
		return !p.gone.Load()
	}
	if l.stopped {
		return false
	}
	// Dialing does not block: the connection is made by gRPC, and the
	// first ping waits for it.
	conn, err := grpc.Dial(addr, l.dial...)
	if err != nil {
		return true // an address gRPC cannot parse; the library says so
	}
	ctx, cancel := context.WithCancel(l.ctx)
	p := &peer{addr: addr, conn: conn, ctx: ctx, cancel: cancel}
	p.heard.Store(int64(l.now()))
	l.peers[addr] = p
	l.fast.Store(addr, p)
	l.wg.Add(1)
	go l.ping(p)
	return true
}

// ping keeps a stream to p's liveness check open and pings it every
// interval, until p is forgotten or the node stops.
func (l *liveness) ping(p *peer) {
	defer l.wg.Done()
	for p.ctx.Err() == nil {
		l.pingStream(p)
		select {
		case <-p.ctx.Done():
		case <-time.After(l.interval):
		}
	}
}

func (l *liveness) pingStream(p *peer) {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	st, err := p.conn.NewStream(ctx, livenessStream, livenessMethod)
	if err != nil {
		return
	}
	answers := make(chan struct{})
	go func() {
		defer close(answers)
		defer cancel()
		for {
			env := new(wire.Envelope)
			if st.RecvMsg(env) != nil {
				return
			}
			// An answer to a ping never sent is a peer to stop believing.
			if env.GetKind() != pongKind || env.GetSeq() == 0 || env.GetSeq() > p.sent.Load() {
				return
			}
			l.answered(p, env.GetSeq())
		}
	}()
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for ctx.Err() == nil && st.SendMsg(&wire.Envelope{Kind: pingKind, Seq: p.sent.Add(1)}) == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	cancel()
	<-answers
}

// answered records p's answer to ping seq; a peer seen gone is believed
// again only for a ping sent after it was seen gone, never for one still
// on its way.
func (l *liveness) answered(p *peer, seq uint64) {
	p.heard.Store(int64(l.now()))
	if !p.gone.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.gone.Load() && seq > p.goneSeq {
		p.gone.Store(false)
	}
}

// judge sees peers gone: one that left its pings unanswered for the
// timeout, counting only the time this node itself ran (a node stopped
// or starved for a while does not blame its peers for what it could not
// read).
func (l *liveness) judge() {
	defer l.wg.Done()
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	last := l.now()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-tick.C:
		}
		now := l.now()
		gap := now - last
		last = now
		var gone []string
		l.mu.Lock()
		for addr, p := range l.peers {
			if p.gone.Load() {
				if now-p.goneAt > l.goneFor {
					p.cancel()
					p.conn.Close()
					delete(l.peers, addr)
					l.fast.Delete(addr)
				}
				continue
			}
			if late := gap - l.interval; late > l.interval/2 {
				p.forgive(late, now)
			}
			if now-time.Duration(p.heard.Load()) > l.timeout {
				gone = append(gone, l.seeGoneLocked(p, now))
			}
		}
		l.mu.Unlock()
		for _, addr := range gone {
			// The library's endpoint manager ends the endpoint, and its
			// watcher tells every watcher Terminated{AddressTerminated},
			// as for a connection it saw break.
			l.t.sys.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: addr})
			// The peer's own connections here are closed, so that it too
			// sees this node gone, through its library, if it runs again.
			l.t.served.sever(addr)
		}
	}
}

// forgive moves p's last answer later by the time this node was late,
// never past now.
func (p *peer) forgive(late, now time.Duration) {
	for {
		old := p.heard.Load()
		moved := min(old+int64(late), int64(now))
		if p.heard.CompareAndSwap(old, moved) {
			return
		}
	}
}

func (l *liveness) seeGoneLocked(p *peer, now time.Duration) string {
	p.goneSeq = p.sent.Load()
	p.goneAt = now
	p.gone.Store(true)
	return p.addr
}

// lost is the library's word that addr's connection broke: the peer is
// gone until it answers a ping sent from now on.
func (l *liveness) lost(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.peers[addr]; ok && !p.gone.Load() {
		l.seeGoneLocked(p, l.now())
	}
}
