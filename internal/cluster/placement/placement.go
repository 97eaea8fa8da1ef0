package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/membership"
	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/registry"
)

// Errors a start of a remote kernel fails with; the registry wraps them
// in ErrStartupFailed.
var (
	// ErrNoNode: no live node (the local one included) has free capacity,
	// or every one with some refused the kernel. It is the registry's
	// ErrCapacityExhausted, so the call's fallback says capacity_exhausted.
	ErrNoNode = fmt.Errorf("%w: no node has free capacity", registry.ErrCapacityExhausted)
	// ErrNodeLost: the node chosen was lost before its kernel started.
	ErrNodeLost     = errors.New("node lost")
	errProxyStopped = errors.New("kernel proxy stopped")
)

// RefusedError is a node's refusal to start a kernel, with its reason.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "node refused the kernel: " + e.Reason }

// Config configures the session side of a cluster.
type Config struct {
	// LocalCapacity is how many kernels the session side runs itself;
	// 0 places every kernel on a kernel node.
	LocalCapacity int
	// StartTimeout bounds a remote kernel's start (placement, the node's
	// answer).
	StartTimeout time.Duration
	// StopTimeout bounds a remote kernel's graceful stop.
	StopTimeout time.Duration
	// Feed, if set, is the membership the directory reads besides the
	// hellos (docs/cluster.md, Membership): several session sides then
	// share the kernel nodes it lists.
	Feed   membership.Feed
	Logger *zerolog.Logger
}

// Cluster is the session side's directory and starter.
type Cluster struct {
	root      *actor.RootContext
	directory *actor.PID
	cfg       Config
	capacity  *atomic.Int64
	// stopFeed ends the feed's watch; feedDone closes once its events
	// stopped coming.
	stopFeed context.CancelFunc
	feedDone chan struct{}
	stopOnce sync.Once
}

// Start spawns the node directory on sys under its well-known name.
func Start(sys *actor.ActorSystem, cfg Config) (*Cluster, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 15 * time.Second
	}
	if cfg.Logger == nil {
		nop := zerolog.Nop()
		cfg.Logger = &nop
	}
	capacity := new(atomic.Int64)
	capacity.Store(int64(cfg.LocalCapacity))
	d := &directory{incarnation: kernelhost.NewIncarnation(), localCapacity: cfg.LocalCapacity,
		nodes: map[string]*node{}, placed: map[string]string{}, log: cfg.Logger, capacity: capacity,
		members: map[string]membership.Member{}, readmit: map[string]time.Duration{}}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return d }), kernelhost.DirectoryName)
	if err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	c := &Cluster{root: sys.Root, directory: pid, cfg: cfg, capacity: capacity, stopFeed: func() {}, feedDone: make(chan struct{})}
	if cfg.Feed == nil {
		close(c.feedDone)
		return c, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	events, err := cfg.Feed.Watch(ctx)
	if err != nil {
		cancel()
		sys.Root.Stop(pid)
		return nil, fmt.Errorf("cluster membership: %w", err)
	}
	c.stopFeed = cancel
	go func() {
		defer close(c.feedDone)
		// The channel closes once ctx ends; every event goes to the
		// directory in order.
		for ev := range events {
			sys.Root.Send(pid, memberMsg{ev: ev})
		}
	}()
	return c, nil
}

// Stop ends the directory's reading of its feed and returns once it
// stopped, or when ctx ends.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(c.stopFeed)
	select {
	case <-c.feedDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster membership: %w", ctx.Err())
	}
}

// Capacity is how many kernels the live nodes take in all, the local
// node's included: the registry's cap on live kernels in a cluster, so
// that a node's joining adds its capacity and its loss takes it away.
func (c *Cluster) Capacity() int { return int(c.capacity.Load()) }

// Nodes lists the nodes and their load, for the snapshot.
func (c *Cluster) Nodes(ctx context.Context) ([]NodeStatus, error) {
	reply := make(chan []NodeStatus, 1)
	c.root.Send(c.directory, nodesMsg{reply: reply})
	select {
	case ns := <-reply:
		return ns, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("cluster nodes: %w", ctx.Err())
	}
}

// Starter wraps the registry's local starter: each new kernel goes where
// the directory places it, locally through local, remotely through a
// proxy spawned under spawner (the workers' supervisor), so the registry
// watches and stops a remote kernel as it does a local one.
func (c *Cluster) Starter(spawner actor.SpawnerContext, local registry.Starter) registry.Starter {
	return func(ctx context.Context, key registry.Key, gen uint64, wo registry.WorkerOptions) (kernelworker.Handle, error) {
		// A node that refuses (full with another session side's kernels,
		// shutting down) or is lost before it answers is skipped, and the
		// next is tried; each node once.
		var tried map[string]bool
		var last error
		for {
			pl, err := c.place(ctx, tried)
			if errors.Is(err, ErrNoNode) && last != nil {
				return kernelworker.Handle{}, fmt.Errorf("%w (the last refusal: %w)", ErrNoNode, last)
			}
			if err != nil {
				return kernelworker.Handle{}, err
			}
			if pl.address == localNode {
				h, err := local(ctx, key, gen, wo)
				if err != nil || h.PID == nil {
					c.root.Send(c.directory, unplaceMsg{address: localNode})
					return h, err
				}
				c.root.Send(c.directory, placedMsg{pid: h.PID, address: localNode})
				return h, nil
			}
			h, err := c.startRemote(ctx, spawner, pl, key, gen, wo)
			if err == nil {
				c.root.Send(c.directory, placedMsg{pid: h.PID, address: pl.address})
				return h, nil
			}
			c.root.Send(c.directory, unplaceMsg{address: pl.address})
			var refused *RefusedError
			if ctx.Err() != nil || (!errors.As(err, &refused) && !errors.Is(err, ErrNodeLost)) {
				return kernelworker.Handle{}, err
			}
			c.cfg.Logger.Info().Err(err).Str("node", pl.address).Msg("execute_code cluster: trying another node")
			if tried == nil {
				tried = map[string]bool{}
			}
			tried[pl.address] = true
			last = err
		}
	}
}

func (c *Cluster) place(ctx context.Context, exclude map[string]bool) (placement, error) {
	reply := make(chan placement, 1)
	c.root.Send(c.directory, placeMsg{exclude: exclude, reply: reply})
	select {
	case pl := <-reply:
		if !pl.ok {
			return placement{}, ErrNoNode
		}
		return pl, nil
	case <-ctx.Done():
		// The directory has counted the kernel, or will: it uncounts it.
		c.root.Send(c.directory, abandonMsg{reply: reply})
		return placement{}, fmt.Errorf("place kernel: %w", ctx.Err())
	}
}

func (c *Cluster) startRemote(ctx context.Context, spawner actor.SpawnerContext, pl placement, key registry.Key,
	gen uint64, wo registry.WorkerOptions) (kernelworker.Handle, error) {
	inc := kernelhost.NewIncarnation()
	started := make(chan error, 1)
	p := &proxy{
		key: key, generation: gen, incarnation: inc, node: pl.host, started: started,
		log: c.cfg.Logger, stopTimeout: c.cfg.StopTimeout,
	}
	p.start = &wire.StartKernel{Key: key.Digest(), Generation: gen, HelperSource: wo.HelperSource,
		MaxQueuedCells: wo.MaxQueuedCells, MaxOutputBytes: wo.MaxOutputBytes, Limits: limitsOf(wo)}
	pid, err := spawner.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		// The owner the node watches is this proxy, whose name is known
		// only once spawned: Started fills it in.
		return p
	}), "remote-"+inc)
	if err != nil {
		return kernelworker.Handle{}, fmt.Errorf("kernel proxy: %w", err)
	}
	t := time.NewTimer(c.cfg.StartTimeout)
	defer t.Stop()
	select {
	case err = <-started:
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("node %s did not answer within %s", pl.address, c.cfg.StartTimeout)
	}
	if err != nil {
		c.root.Stop(pid)
		return kernelworker.Handle{}, fmt.Errorf("remote kernel on %s: %w", pl.address, err)
	}
	return kernelworker.Handle{PID: pid, Remote: true}, nil
}

func limitsOf(wo registry.WorkerOptions) wire.Limits {
	l := wo.Limits
	return wire.Limits{CPUSeconds: l.CPUSeconds, MemoryMB: l.MemoryMB, FsizeMB: l.FsizeMB, NProc: l.NProc, CPUHardUnlimited: l.CPUHardUnlimited}
}

// Execute queues cell on the remote kernel whose proxy is proxy (the
// registry's allocation of it); see the package's Execute.
func (c *Cluster) Execute(ctx context.Context, proxy *actor.PID, cell Cell) <-chan *wire.CellResult {
	return Execute(ctx, c.root, proxy, cell)
}
