// Package transport starts protoactor's remote on an actor system the
// way every node of a cluster must run it (docs/cluster.md, Security):
// mutual TLS on the server and on every dial, gRPC keepalive both ways,
// a raised message limit, loopback unless an address is given, a listen
// failure as an error, and a stream filter that lets only the cluster's
// envelope and the remote's own watch messages reach protoactor's
// deserializer.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/executecode/executecode/internal/cluster/certs"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// Defaults.
const (
	DefaultListen           = "127.0.0.1:0"
	DefaultKeepalive        = 10 * time.Second
	DefaultKeepaliveTimeout = 3 * time.Second
	// MaxMessageBytes is every node's gRPC message limit, above the
	// largest envelope and protoactor's batching of many: a message over
	// the library's default 4 MiB would reset a healthy connection and
	// tell every watcher on it that the node is gone.
	MaxMessageBytes = 64 << 20
)

// ErrInvalidConfig is a Config that Start refuses; the error names the key.
var ErrInvalidConfig = errors.New("invalid transport config")

// Config is one node's transport.
type Config struct {
	// Listen is host:port; "" is DefaultListen (loopback).
	Listen string
	// TLS is the node's mutual-TLS configuration; it is required.
	TLS *certs.TLS
	// Keepalive pings an idle connection this often; a peer silent for
	// KeepaliveTimeout after a ping is gone. Zero takes the defaults.
	// gRPC's client raises a Keepalive under 10 s to 10 s, so a frozen
	// peer is seen gone after max(Keepalive, 10 s) + KeepaliveTimeout.
	Keepalive, KeepaliveTimeout time.Duration
}

// Transport is a started remote.
type Transport struct {
	remote  *remote.Remote
	address string
}

// Start starts the remote on sys.
func Start(sys *actor.ActorSystem, cfg Config) (*Transport, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if cfg.TLS == nil || cfg.TLS.Server == nil || cfg.TLS.Client == nil {
		return nil, fmt.Errorf("%w: tls: nodes talk only over mutual TLS (give the CA, certificate and key)", ErrInvalidConfig)
	}
	host, portText, err := net.SplitHostPort(cfg.Listen)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port < 0 || port > 65535 || host == "" {
		return nil, fmt.Errorf("%w: listen %q is not host:port", ErrInvalidConfig, cfg.Listen)
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
	ka := keepalive.ClientParameters{Time: cfg.Keepalive, Timeout: cfg.KeepaliveTimeout, PermitWithoutStream: true}
	enforce := keepalive.EnforcementPolicy{MinTime: cfg.Keepalive / 2, PermitWithoutStream: true}
	rcfg := remote.Configure(host, port,
		// The endpoint writer sends up to this many queued messages as one
		// gRPC message: at most three of the largest envelopes fit in the
		// limit, where the library's 1000 could exceed it and reset a
		// healthy connection (every watcher on it told the node is gone).
		remote.WithEndpointWriterBatchSize(maxBatch),
		remote.WithServerOptions(
			grpc.Creds(credentials.NewTLS(cfg.TLS.Server)),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.Keepalive, Timeout: cfg.KeepaliveTimeout}),
			grpc.KeepaliveEnforcementPolicy(enforce),
			grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
			grpc.StreamInterceptor(filterStreams),
			// The library's unary methods panic unconditionally, and gRPC
			// does not recover a handler's panic: one call would end the
			// node. No node calls them.
			grpc.UnaryInterceptor(refuseUnary),
		),
		// These replace the library's defaults, insecure dialing among
		// them: no connection leaves a node without TLS.
		remote.WithDialOptions(
			grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS.Client)),
			grpc.WithKeepaliveParams(ka),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		),
	)
	r := remote.NewRemote(sys, rcfg)
	if err := start(r); err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	return &Transport{remote: r, address: sys.ProcessRegistry.Address}, nil
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

// Stop shuts the remote down, gracefully within ctx and by force after.
func (t *Transport) Stop(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.remote.Shutdown(true)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.remote.Shutdown(false)
		<-done
	}
}

// allowedTypes are the message types a peer may send in a batch: the
// cluster's envelope, and what the remote needs to watch across nodes and
// to fail a request to a dead actor. Everything else, a spawn request to
// the activator or a stop of any actor included, is refused: a peer
// reaches this node's actors only through the envelope.
var allowedTypes = map[string]bool{
	"executecode.cluster.Envelope": true,
	"actor.Watch":                  true,
	"actor.Unwatch":                true,
	"actor.Terminated":             true,
	"actor.DeadLetterResponse":     true,
}

// filterStreams checks every message of the remote's stream before the
// library decodes its payloads: a type it does not link would crash the
// process in its deserializer, and an index out of a batch's tables
// would panic in its handler.
func filterStreams(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, filteredStream{ss})
}

type filteredStream struct{ grpc.ServerStream }

// maxBatch is the most envelopes of MaxPayloadBytes one message holds.
const maxBatch = MaxMessageBytes / (wire.MaxPayloadBytes + 1<<20)

func refuseUnary(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
	return nil, status.Error(codes.Unimplemented, "no unary calls on a node")
}

func (s filteredStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := checkBatch(b); err != nil {
			return status.Error(codes.PermissionDenied, "message refused: "+err.Error())
		}
	}
	return nil
}

// checkBatch admits a batch whose every type is allowed, serialized as
// protobuf, and whose every index points into its tables.
func checkBatch(b *remote.MessageBatch) error {
	for _, name := range b.GetTypeNames() {
		if !allowedTypes[name] {
			return fmt.Errorf("type %.64q", name)
		}
	}
	types, senders, targets := len(b.GetTypeNames()), len(b.GetSenders()), len(b.GetTargets())
	for _, e := range b.GetEnvelopes() {
		if e.GetSerializerId() != 0 {
			return errors.New("serializer")
		}
		if int(e.GetTypeId()) < 0 || int(e.GetTypeId()) >= types {
			return errors.New("type index")
		}
		if int(e.GetTarget()) < 0 || int(e.GetTarget()) >= targets {
			return errors.New("target index")
		}
		// Sender 0 means none; others are 1-based into Senders.
		if s := int(e.GetSender()); s < 0 || s > senders {
			return errors.New("sender index")
		}
		if b.GetTargets()[e.GetTarget()] == nil {
			return errors.New("no target")
		}
		if err := checkSystem(b.GetTypeNames()[e.GetTypeId()], e.GetMessageData()); err != nil {
			return err
		}
	}
	return nil
}

// checkSystem decodes the remote's own watch messages, which the library
// dereferences without a check: each must name its actors.
func checkSystem(name string, data []byte) error {
	var pids []*actor.PID
	switch name {
	case "actor.Watch":
		var m actor.Watch
		if proto.Unmarshal(data, &m) != nil {
			return errors.New("watch")
		}
		pids = []*actor.PID{m.GetWatcher()}
	case "actor.Unwatch":
		var m actor.Unwatch
		if proto.Unmarshal(data, &m) != nil {
			return errors.New("unwatch")
		}
		pids = []*actor.PID{m.GetWatcher()}
	case "actor.Terminated":
		var m actor.Terminated
		if proto.Unmarshal(data, &m) != nil {
			return errors.New("terminated")
		}
		pids = []*actor.PID{m.GetWho()}
	}
	for _, p := range pids {
		if p == nil {
			return errors.New(name + " without its actor")
		}
	}
	return nil
}
