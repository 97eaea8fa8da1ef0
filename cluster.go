package executecode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/actors"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/cluster/certs"
	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/membership"
	"github.com/executecode/executecode/internal/cluster/placement"
	"github.com/executecode/executecode/internal/cluster/transport"
	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/registry"
)

// ErrNotClustered is asked of a runtime that is no cluster's node.
var ErrNotClustered = errors.New("runtime is not a cluster node")

// clusterRole is what a runtime is in a cluster (docs/cluster.md).
type clusterRole int

const (
	roleNone clusterRole = iota
	// roleSession keeps the registry, approvals, budgets and tools, and
	// places kernels on kernel nodes.
	roleSession
	// roleNode runs kernels for a session side and decides nothing.
	roleNode
)

// clustering is a runtime's cluster setting and, once its tree started,
// the running side.
type clustering struct {
	role clusterRole
	cfg  config.Cluster
	tls  *certs.TLS
	// etcdTLS is the etcd client's TLS; nil for plain HTTP.
	etcdTLS *tls.Config
	// side is the running extension; set when the tree starts.
	side clusterSide
}

// clusterSide is the running session side or kernel node: the tree's
// extension, its address, and its nodes for the snapshot.
type clusterSide interface {
	Address() string
}

// WithCluster makes the runtime the session side of a cluster: its
// session kernels are placed on the kernel nodes that join it, or that
// etcd lists when c.EtcdEndpoints are given (and on itself, up to
// c.LocalCapacity), while every helper call, approval, budget and result
// stays here. The runtime must be in session mode, and c must name its
// mutual-TLS files; New checks both.
func WithCluster(c config.Cluster) Option {
	return func(r *Runtime) { r.cluster = clustering{role: roleSession, cfg: c} }
}

// WithKernelNode makes the runtime a kernel node: it runs the kernels
// session sides place on it, and nothing else: the one at c.Join, and
// with c.EtcdEndpoints every one that reads the node's record there. The
// runtime must be in session mode; c must name its mutual-TLS files and
// Join, EtcdEndpoints or both.
func WithKernelNode(c config.Cluster) Option {
	return func(r *Runtime) { r.cluster = clustering{role: roleNode, cfg: c} }
}

// checkCluster validates the cluster setting and loads its certificates.
func (r *Runtime) checkCluster() error {
	c := &r.cluster
	if c.role == roleNone {
		return nil
	}
	if r.cfg.KernelMode != config.Session {
		return fmt.Errorf("%w: a cluster node runs session kernels: kernel_mode must be %q", ErrConfig, config.Session)
	}
	if err := c.cfg.Check(c.role == roleNode); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	t, err := certs.Load(c.cfg.CAFile, c.cfg.CertFile, c.cfg.KeyFile, time.Now())
	if err != nil {
		return fmt.Errorf("%w: cluster certificates: %w", ErrConfig, err)
	}
	c.tls = t
	if c.cfg.EtcdTLS() {
		et, err := certs.Load(c.cfg.EtcdCAFile, c.cfg.EtcdCertFile, c.cfg.EtcdKeyFile, time.Now())
		if err != nil {
			return fmt.Errorf("%w: etcd certificates: %w", ErrConfig, err)
		}
		c.etcdTLS = et.Client
	}
	return nil
}

// dialEtcd is the etcd membership's client; it waits for nothing.
func (r *Runtime) dialEtcd() (*membership.Etcd, error) {
	c := r.cluster.cfg
	scheme := "http://"
	if r.cluster.etcdTLS != nil {
		scheme = "https://"
	}
	eps := make([]string, len(c.EtcdEndpoints))
	for i, e := range c.EtcdEndpoints {
		eps[i] = scheme + e
	}
	e, err := membership.DialEtcd(membership.EtcdConfig{Endpoints: eps, TLS: r.cluster.etcdTLS,
		Prefix: c.EtcdPrefix, TTL: c.EtcdTTL, Log: &r.log})
	if err != nil {
		return nil, fmt.Errorf("cluster etcd: %w", err)
	}
	return e, nil
}

// ClusterAddress starts the runtime's node (its supervision tree and
// transport) if it has not started, and says the host:port peers reach it
// at. A kernel node says hello to its session side from then on.
func (r *Runtime) ClusterAddress(ctx context.Context) (string, error) {
	if r.cluster.role == roleNone {
		return "", ErrNotClustered
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, err := r.kernels(); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cluster.side.Address(), nil
}

// clusterExtension is the tree's extension for the runtime's role; nil for
// a runtime in no cluster. Called with r.mu held, from kernels().
func (r *Runtime) clusterExtension() actors.Extension {
	switch r.cluster.role {
	case roleSession:
		s := &sessionSide{r: r}
		r.cluster.side = s
		return s
	case roleNode:
		n := &nodeSide{r: r, ready: make(chan struct{})}
		r.cluster.side = n
		return n
	}
	return nil
}

func (r *Runtime) transportConfig() transport.Config {
	c := r.cluster.cfg
	return transport.Config{Listen: c.Listen, TLS: r.cluster.tls, LivenessInterval: c.LivenessInterval,
		LivenessTimeout: c.LivenessTimeout, Keepalive: c.Keepalive, KeepaliveTimeout: c.KeepaliveTimeout}
}

// sessionSide is the session side's extension: the transport and the
// node directory, whose starter places each new kernel, and with etcd the
// membership it reads.
type sessionSide struct {
	r       *Runtime
	tr      *transport.Transport
	cluster *placement.Cluster
	etcd    *membership.Etcd
}

func (s *sessionSide) Start(sys *actor.ActorSystem) error {
	tr, err := transport.Start(sys, s.r.transportConfig())
	if err != nil {
		return fmt.Errorf("cluster transport: %w", err)
	}
	local := s.r.cluster.cfg.LocalCapacity
	if local < 0 {
		local = s.r.cfg.MaxLiveKernels
	}
	pc := placement.Config{LocalCapacity: local, Logger: &s.r.log}
	if s.r.cluster.cfg.Etcd() {
		// etcd's absence now is no reason to refuse: the feed reports it,
		// keeps trying, and lists the nodes once etcd answers.
		if s.etcd, err = s.r.dialEtcd(); err != nil {
			tr.Stop(context.Background())
			return err
		}
		pc.Feed = s.etcd
	}
	cl, err := placement.Start(sys, pc)
	if err != nil {
		s.closeEtcd(context.Background())
		tr.Stop(context.Background())
		return err
	}
	s.tr, s.cluster = tr, cl
	return nil
}

func (s *sessionSide) closeEtcd(ctx context.Context) {
	if s.etcd == nil {
		return
	}
	if err := s.etcd.Close(ctx); err != nil {
		s.r.log.Warn().Err(err).Msg("execute_code cluster: closing the etcd client")
	}
}

func (s *sessionSide) Starter(spawner actor.SpawnerContext, local registry.Starter) registry.Starter {
	return s.cluster.Starter(spawner, local)
}

func (s *sessionSide) Stop(ctx context.Context) {
	if err := s.cluster.Stop(ctx); err != nil {
		s.r.log.Warn().Err(err).Msg("execute_code cluster: stopping the membership feed")
	}
	s.closeEtcd(ctx)
	s.tr.Stop(ctx)
}

func (s *sessionSide) Address() string { return s.tr.Address() }

// nodeSide is a kernel node's extension: the transport and the kernelhost
// actor, whose kernels start through the tree's own starter (under the
// workers supervisor, confined and limited as any kernel of this runtime),
// and with etcd the node's registration.
type nodeSide struct {
	r     *Runtime
	tr    *transport.Transport
	sys   *actor.ActorSystem
	etcd  *membership.Etcd
	local registry.Starter
	// ready is closed once local is set: the tree calls Starter after
	// Start, and a StartKernel may arrive in between.
	ready chan struct{}
}

func (n *nodeSide) Start(sys *actor.ActorSystem) error {
	tr, err := transport.Start(sys, n.r.transportConfig())
	if err != nil {
		return fmt.Errorf("cluster transport: %w", err)
	}
	n.tr, n.sys = tr, sys
	c := n.r.cluster.cfg
	var directory *actor.PID
	if c.Join != "" {
		directory = actor.NewPID(c.Join, kernelhost.DirectoryName)
	}
	host, inc, err := kernelhost.Start(sys, kernelhost.Config{
		Host: &nodeHost{side: n}, Directory: directory, Capacity: c.Capacity, Logger: &n.r.log,
	})
	if err != nil {
		tr.Stop(context.Background())
		return err
	}
	if !c.Etcd() {
		return nil
	}
	if n.etcd, err = n.r.dialEtcd(); err == nil {
		// Bounded by the client's call timeout (a lease and a put); a
		// node that cannot register refuses to start, as one that
		// cannot listen does.
		ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
		_, err = n.etcd.Register(ctx, membership.Member{Address: tr.Address(), Incarnation: inc, Capacity: c.Capacity})
		cancel()
		if err != nil {
			err = fmt.Errorf("cluster etcd: register this node at %v: %w", c.EtcdEndpoints, err)
		}
	}
	if err != nil {
		n.closeEtcd(context.Background())
		sys.Root.Stop(host)
		tr.Stop(context.Background())
		return err
	}
	return nil
}

// registerTimeout bounds a kernel node's first registration in etcd.
const registerTimeout = 10 * time.Second

func (n *nodeSide) closeEtcd(ctx context.Context) {
	if n.etcd == nil {
		return
	}
	// Close revokes the node's lease: its record goes at once, and the
	// session sides see it leave.
	if err := n.etcd.Close(ctx); err != nil {
		n.r.log.Warn().Err(err).Msg("execute_code cluster: deregistering from etcd")
	}
}

func (n *nodeSide) Starter(_ actor.SpawnerContext, local registry.Starter) registry.Starter {
	n.local = local
	close(n.ready)
	// The node's own registry starts no kernel: every kernel here is a
	// session side's, started by kernelhost.
	return func(context.Context, registry.Key, uint64, registry.WorkerOptions) (kernelworker.Handle, error) {
		return kernelworker.Handle{}, fmt.Errorf("%w: a kernel node runs only the kernels its session side places", kernelworker.ErrStartupFailed)
	}
}

func (n *nodeSide) Stop(ctx context.Context) {
	n.closeEtcd(ctx)
	n.tr.Stop(ctx)
}

func (n *nodeSide) Address() string { return n.tr.Address() }

// clusterNodes are a session side's nodes for the snapshot; nil for any
// other runtime.
func (r *Runtime) clusterNodes(ctx context.Context) ([]introspect.Node, error) {
	r.mu.Lock()
	s, ok := r.cluster.side.(*sessionSide)
	r.mu.Unlock()
	if !ok {
		return nil, nil
	}
	ns, err := s.cluster.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]introspect.Node, len(ns))
	for i, n := range ns {
		out[i] = introspect.Node{Local: n.Local, Capacity: n.Capacity, Kernels: n.Kernels, Address: n.Address}
	}
	return out, nil
}

// maxLiveKernels is the registry's cap for a cell: max_live_kernels, or on
// a cluster's session side the live nodes' capacity in all, which grows as
// nodes join. At least 1: a cluster without a node then answers that no
// node has free capacity, rather than evicting a kernel for nothing. Only
// called after the tree started (a session cell has an owner).
func (r *Runtime) maxLiveKernels() int {
	if s, ok := r.cluster.side.(*sessionSide); ok {
		return max(s.cluster.Capacity(), 1)
	}
	return r.cfg.MaxLiveKernels
}
