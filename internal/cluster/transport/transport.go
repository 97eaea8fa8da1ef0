// Package transport starts protoactor's remote on an actor system the
// way every node of a cluster must run it (docs/cluster.md, Security):
// mutual TLS on the server and on every dial, a liveness check of its own
// with gRPC keepalive behind it, a raised message limit, loopback unless
// an address is given, a listen failure as an error, a stream filter that
// lets only the cluster's envelope and the remote's own watch messages
// reach protoactor's deserializer, and a stop bounded by its context.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise. One transport runs on an
// actor system, once.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/executecode/executecode/internal/cluster/certs"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// Defaults.
const (
	DefaultListen           = "127.0.0.1:0"
	DefaultKeepalive        = 10 * time.Second
	DefaultKeepaliveTimeout = 3 * time.Second
	DefaultLivenessInterval = 500 * time.Millisecond
	DefaultLivenessTimeout  = 2 * time.Second
	// MinLivenessInterval bounds how often a node pings: a peer answers
	// at most a few times that rate on one stream (maxPingRate).
	MinLivenessInterval = 50 * time.Millisecond
	// MaxMessageBytes is every node's gRPC message limit, above the
	// largest envelope and protoactor's batching of many: a message over
	// the library's default 4 MiB would reset a healthy connection and
	// tell every watcher on it that the node is gone.
	MaxMessageBytes = 64 << 20
)

// Errors callers branch on with errors.Is.
var (
	// ErrInvalidConfig is a Config that Start refuses; the error names the key.
	ErrInvalidConfig = errors.New("invalid transport config")
	// ErrStopUnfinished is Stop's answer when its context ended first:
	// the transport was forced down and finishes in the background; a
	// later Stop waits for it.
	ErrStopUnfinished = errors.New("transport stop unfinished")
)

// Config is one node's transport.
type Config struct {
	// Listen is host:port; "" is DefaultListen (loopback).
	Listen string
	// TLS is the node's mutual-TLS configuration; it is required.
	TLS *certs.TLS
	// LivenessInterval is how often the node pings every peer it talks
	// to (liveness_interval); LivenessTimeout is how long a peer may
	// leave its pings unanswered before it is seen gone, every watcher
	// of its actors told Terminated{AddressTerminated} as on a crash
	// (liveness_timeout). Zero takes the defaults; the interval is at
	// least MinLivenessInterval and below the timeout.
	LivenessInterval, LivenessTimeout time.Duration
	// Keepalive is gRPC's, the second line behind the liveness check:
	// gRPC's client raises a Keepalive under 10 s to 10 s, so it sees a
	// frozen peer gone after max(Keepalive, 10 s) + KeepaliveTimeout.
	// Zero takes the defaults.
	Keepalive, KeepaliveTimeout time.Duration
}

// Transport is a started remote.
type Transport struct {
	sys     *actor.ActorSystem
	remote  *remote.Remote
	address string
	cfg     Config
	live    *liveness
	dialer  *dialer
	served  *served
	in      *inbound
	sub     *eventstream.Subscription

	// sending counts local goroutines inside the library's send path;
	// closed turns them away. Stop waits for the count to reach zero
	// before it stops the library, whose stop flag is not synchronized.
	sending atomic.Int64
	closed  atomic.Bool

	stopOnce, forceOnce sync.Once
	forced, done        chan struct{}
}

// Start starts the remote on sys.
func Start(sys *actor.ActorSystem, cfg Config) (*Transport, error) {
	cfg, host, port, err := validate(cfg)
	if err != nil {
		return nil, err
	}
	// The library panics when its listen fails: try the address first, so
	// a port in use is an error here (a race with another process taking
	// it in between is still the library's panic, recovered below).
	if port != 0 {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		ln.Close()
	}
	t := &Transport{
		sys: sys, cfg: cfg,
		dialer: newDialer(), served: newServed(), in: newInbound(),
		forced: make(chan struct{}), done: make(chan struct{}),
	}
	ka := keepalive.ClientParameters{Time: cfg.Keepalive, Timeout: cfg.KeepaliveTimeout, PermitWithoutStream: true}
	enforce := keepalive.EnforcementPolicy{MinTime: cfg.Keepalive / 2, PermitWithoutStream: true}
	dial := []grpc.DialOption{
		// These replace the library's defaults, insecure dialing among
		// them: no connection leaves a node without TLS.
		grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS.Client)),
		grpc.WithKeepaliveParams(ka),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		// Every connection is the dialer's, so Stop can close one a
		// frozen peer holds up; a handshake that outlasts the liveness
		// timeout is a peer gone, not one to wait 20 s for.
		grpc.WithContextDialer(t.dialer.dial),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: cfg.LivenessTimeout}),
	}
	rcfg := remote.Configure(host, port,
		// The endpoint writer sends up to this many queued messages as one
		// gRPC message: at most three of the largest envelopes fit in the
		// limit, where the library's 1000 could exceed it and reset a
		// healthy connection (every watcher on it told the node is gone).
		remote.WithEndpointWriterBatchSize(maxBatch),
		remote.WithServerOptions(
			grpc.Creds(serverCreds{credentials.NewTLS(cfg.TLS.Server), t.served}),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.Keepalive, Timeout: cfg.KeepaliveTimeout}),
			grpc.KeepaliveEnforcementPolicy(enforce),
			grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
			// A node opens one stream per connection (the remote's, or
			// the liveness check's); a few more cost a peer nothing.
			grpc.MaxConcurrentStreams(maxStreamsPerConn),
			grpc.StreamInterceptor(t.serveStream),
			// The liveness check is a method the library does not know;
			// serveStream answers it and refuses every other.
			grpc.UnknownServiceHandler(refuseStream),
			// The library's unary methods panic unconditionally, and gRPC
			// does not recover a handler's panic: one call would end the
			// node. No node calls them.
			grpc.UnaryInterceptor(refuseUnary),
		),
		remote.WithDialOptions(dial...),
	)
	// One attempt: a connection that fails is a peer gone, and the
	// liveness check says when it answers again; the library sleeps 2 s
	// after every failed attempt, which Stop would have to wait out.
	rcfg.MaxRetryCount = 1
	r := remote.NewRemote(sys, rcfg)
	t.remote = r
	t.live = newLiveness(t, dial)
	t.guardSends()
	if err := start(r); err != nil {
		t.closed.Store(true)
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	t.address = sys.ProcessRegistry.Address
	// A connection the library saw break (a crash, a peer's goodbye) is
	// a peer gone until it answers a ping again.
	t.sub = sys.EventStream.SubscribeWithPredicate(func(evt any) {
		t.live.lost(evt.(*remote.EndpointTerminatedEvent).Address)
	}, func(evt any) bool {
		_, ok := evt.(*remote.EndpointTerminatedEvent)
		return ok
	})
	t.live.start()
	return t, nil
}

func validate(cfg Config) (Config, string, int, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if cfg.LivenessInterval < 0 {
		return cfg, "", 0, fmt.Errorf("%w: liveness_interval %s is not positive", ErrInvalidConfig, cfg.LivenessInterval)
	}
	if cfg.LivenessTimeout < 0 {
		return cfg, "", 0, fmt.Errorf("%w: liveness_timeout %s is not positive", ErrInvalidConfig, cfg.LivenessTimeout)
	}
	if cfg.LivenessInterval == 0 {
		cfg.LivenessInterval = DefaultLivenessInterval
	}
	if cfg.LivenessTimeout == 0 {
		cfg.LivenessTimeout = DefaultLivenessTimeout
	}
	if cfg.LivenessInterval < MinLivenessInterval {
		return cfg, "", 0, fmt.Errorf("%w: liveness_interval %s is under %s", ErrInvalidConfig, cfg.LivenessInterval, MinLivenessInterval)
	}
	if cfg.LivenessTimeout <= cfg.LivenessInterval {
		return cfg, "", 0, fmt.Errorf("%w: liveness_timeout %s is not above liveness_interval %s", ErrInvalidConfig, cfg.LivenessTimeout, cfg.LivenessInterval)
	}
	if cfg.TLS == nil || cfg.TLS.Server == nil || cfg.TLS.Client == nil {
		return cfg, "", 0, fmt.Errorf("%w: tls: nodes talk only over mutual TLS (give the CA, certificate and key)", ErrInvalidConfig)
	}
	host, portText, err := net.SplitHostPort(cfg.Listen)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port < 0 || port > 65535 || host == "" {
		return cfg, "", 0, fmt.Errorf("%w: listen %q is not host:port", ErrInvalidConfig, cfg.Listen)
	}
	return cfg, host, port, nil
}

func start(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return nil
}

// Address is the node's host:port as peers reach it.
func (t *Transport) Address() string { return t.address }

// Stop shuts the transport down: local sends to other nodes end (a
// request fails at once, a watch is answered AddressTerminated), the
// liveness check stops, inbound messages stop reaching actors, and the
// remote says goodbye to its peers, which get LivenessTimeout to close
// their streams before every connection is closed by force. Stop returns
// nil once all of it has ended, or, when ctx ends first, forces the rest
// and returns ErrStopUnfinished; a later Stop waits for the same stop.
func (t *Transport) Stop(ctx context.Context) error {
	t.stopOnce.Do(func() { go t.stop() })
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
	}
	t.force()
	select {
	case <-t.done:
		return nil
	default:
		return fmt.Errorf("%w: %w", ErrStopUnfinished, ctx.Err())
	}
}

// stop runs once, in the order the library needs: nothing of ours inside
// its send path or its stream reader when it sets its unsynchronized
// flags, and every goroutine it or we started ended before done.
func (t *Transport) stop() {
	defer close(t.done)
	grace := time.AfterFunc(t.cfg.LivenessTimeout, t.force)
	defer grace.Stop()

	t.closed.Store(true)
	for t.sending.Load() != 0 && !t.isForced() {
		time.Sleep(time.Millisecond)
	}
	t.live.stop()
	t.in.park(t.forced)

	// Not the library's graceful Shutdown: its endpoint manager sends a
	// goodbye on every stream reader's channel, which a reader whose
	// stream is ending closes at the same moment (a send on a closed
	// channel: a panic, and a data race the race detector reports).
	// Closing the server and every dialed connection tells each peer as
	// quickly: its endpoint sees the stream break, and its watchers get
	// AddressTerminated.
	t.force()
	t.in.wait()
	t.sys.EventStream.Unsubscribe(t.sub)
}

// force closes every connection: the server's (the library's graceful
// stop waits for peers, a frozen one forever) and every one dialed (an
// endpoint writer blocked sending to a frozen peer, or connecting to one,
// holds up the library's stop).
func (t *Transport) force() {
	t.forceOnce.Do(func() {
		close(t.forced)
		t.dialer.closeAll()
		t.remote.Shutdown(false)
	})
}

func (t *Transport) isForced() bool {
	select {
	case <-t.forced:
		return true
	default:
		return false
	}
}

// maxBatch is the most envelopes of MaxPayloadBytes one message holds.
const maxBatch = MaxMessageBytes / (wire.MaxPayloadBytes + 1<<20)

const (
	remoteMethod      = "/remote.Remoting/Receive"
	maxStreamsPerConn = 8
)

// serveStream admits the remote's stream, filtered, and the liveness
// check's; any other method is refused.
func (t *Transport) serveStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch info.FullMethod {
	case remoteMethod:
		return t.in.serveRemote(ss, t.served, func(fs grpc.ServerStream) error { return handler(srv, fs) })
	case livenessMethod:
		if !t.in.enter() {
			return status.Error(codes.Unavailable, "node stopping")
		}
		defer t.in.leave()
		return t.answerPings(ss)
	}
	return refuseStream(srv, ss)
}

func refuseStream(any, grpc.ServerStream) error {
	return status.Error(codes.Unimplemented, "no such method on a node")
}

func refuseUnary(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
	return nil, status.Error(codes.Unimplemented, "no unary calls on a node")
}
