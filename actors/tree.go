package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/registry"
)

// Bounds of the supervision strategies: a subtree that keeps failing is
// stopped rather than restarted forever.
const (
	maxRestarts   = 10
	restartWindow = time.Minute
	// spawnTimeout bounds the workers supervisor's spawn of one worker
	// actor, which it does at once unless it is gone.
	spawnTimeout = 10 * time.Second
)

// ErrTreeStopped reports a tree whose actors are gone.
var ErrTreeStopped = errors.New("supervision tree stopped")

// Tree is a running supervision tree, as the handles of its actors: its
// users never see an actor system or a PID.
type Tree struct {
	// Registry is the kernel registry: owners, kernels, leases.
	Registry *registry.Client
	// Approvals is the approval broker. It is a child of the root of its
	// own, restarted on its own: its failures never touch a kernel.
	Approvals *approval.Broker
	// Introspect answers with the aggregate snapshot. Like the broker it
	// is a root child restarted on its own.
	Introspect *introspect.Client

	system    *actor.ActorSystem
	extension Extension
	registry  *actor.PID
	workers   *actor.PID
	subtree   *actor.PID
}

// RegisteredProcesses counts the processes in the tree's actor system:
// actors and futures not yet removed. A test of the host reads it to see
// that ended sessions and cells leave nothing behind.
func (t *Tree) RegisteredProcesses() int {
	n := 0
	for _, b := range t.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += b.Count()
	}
	return n
}

// Option configures Start.
type Option func(*options)

type options struct {
	introspect introspect.Config
	extension  Extension
}

// Extension joins the tree to something beyond it: a cluster's session
// side or kernel node (docs/cluster.md). Start runs on the tree's actor
// system before any actor of the tree, Starter may wrap the registry's
// kernel starter (spawner is the workers' supervisor, which remote
// kernels' proxies live under too), and Stop runs after the tree is down.
type Extension interface {
	Start(sys *actor.ActorSystem) error
	Starter(spawner actor.SpawnerContext, local registry.Starter) registry.Starter
	Stop(ctx context.Context)
}

// WithExtension joins the tree to e.
func WithExtension(e Extension) Option {
	return func(o *options) { o.extension = e }
}

// WithIntrospection configures the introspect actor; its Registry is
// always the tree's own.
func WithIntrospection(cfg introspect.Config) Option {
	return func(o *options) { o.introspect = cfg }
}

// Start builds the tree. cfg is the registry's configuration; its Starter
// is replaced by one that boots kernels under the workers supervisor with
// base as the template of every worker's options. acfg configures the
// approval broker.
func Start(cfg registry.Config, base kernelworker.Options, acfg approval.Config, opts ...Option) (*Tree, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// The library's own log lines would land on the host's stdout, which
	// `serve` speaks its protocol on: they are discarded.
	// Its dead-letter throttle keeps a goroutine for one interval after
	// each burst; with nothing logged, a short interval just ends it soon.
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	compactRegistry(sys.ProcessRegistry)
	t := &Tree{system: sys, extension: o.extension}
	if t.extension != nil {
		if err := t.extension.Start(sys); err != nil {
			sys.Shutdown()
			return nil, fmt.Errorf("start supervision tree: %w", err)
		}
	}
	ready := make(chan struct{})
	subtreeProps := actor.PropsFromProducer(func() actor.Actor {
		return &subtree{tree: t, cfg: cfg, base: base, ready: ready, extension: t.extension}
	}, actor.WithSupervisor(actor.NewAllForOneStrategy(maxRestarts, restartWindow, restartDecider)))
	t.Approvals = approval.NewBroker(sys.Root, sys.Root.Spawn(approval.Props(acfg)))
	t.subtree = sys.Root.Spawn(subtreeProps)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.stopExtension(context.Background())
		sys.Shutdown()
		return nil, fmt.Errorf("start supervision tree: %w", ErrTreeStopped)
	}
	// The registry restarts in place, so its PID stays valid for the
	// introspect actor across a subtree restart.
	icfg := o.introspect
	icfg.Registry = t.registry
	t.Registry = registry.NewClient(sys.Root, t.registry)
	t.Introspect = introspect.NewClient(sys.Root, sys.Root.Spawn(introspect.Props(icfg)))
	return t, nil
}

func restartDecider(any) actor.Directive { return actor.RestartDirective }

// registryBuckets is how many of protoactor's process-registry buckets a
// tree keeps; a bucket is a map of 32 lock-striped shards.
const registryBuckets = 1

// compactRegistry shrinks the actor system's process registry from 1,024
// buckets to registryBuckets before any actor of ours is registered.
// Every actor and future (a status query is one) registers a fresh id,
// and the ids spread over all 32,768 shard maps, which allocate their
// storage when first used and never give it back: about 280 bytes per shard, so the
// heap grew with every session cycle and cell until all 9 MB were
// touched, long after the entries themselves had been removed. With 32
// shards the registry holds what is live plus about 9 KiB, and 32 lock
// stripes are plenty for the handful of concurrent registrations a
// runtime makes.
func compactRegistry(pr *actor.ProcessRegistryValue) {
	sm := pr.LocalPIDs
	live := map[string]any{}
	for _, b := range sm.LocalPIDs {
		for id, p := range b.Items() {
			live[id] = p
			b.Remove(id)
		}
	}
	sm.LocalPIDs = append(sm.LocalPIDs[:0:0], sm.LocalPIDs[:registryBuckets]...)
	for id, p := range live {
		sm.GetBucket(id).Set(id, p)
	}
}

// Shutdown stops the subtree (every worker stops its kernel first) and
// then the actor system. It waits for the subtree at most until ctx ends.
func (t *Tree) Shutdown(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- t.system.Root.StopFuture(t.subtree).Wait() }()
	var err error
	select {
	case werr := <-done:
		if werr != nil {
			err = fmt.Errorf("stop supervision tree: %w", werr)
		}
	case <-ctx.Done():
		err = fmt.Errorf("stop supervision tree: %w", ctx.Err())
	}
	t.stopExtension(ctx)
	t.system.Shutdown()
	return err
}

func (t *Tree) stopExtension(ctx context.Context) {
	if t.extension != nil {
		t.extension.Stop(ctx)
	}
}

// subtree is the all-for-one parent of the registry and the workers
// supervisor.
type subtree struct {
	tree      *Tree
	extension Extension
	cfg       registry.Config
	base      kernelworker.Options
	ready     chan struct{}
}

func (s *subtree) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); !ok {
		return
	}
	// Children are spawned once; on a restart protoactor restarts them in
	// place (same PIDs), so the registry's starter keeps pointing at the
	// right supervisor.
	if s.tree.workers != nil {
		return
	}
	workers := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &workersSupervisor{} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, stopDecider))))
	cfg := s.cfg
	base := s.base
	exits := newExitBook()
	cfg.ExitOf = exits.take
	sys := ctx.ActorSystem()
	cfg.Starter = func(sctx context.Context, key registry.Key, generation uint64, wo registry.WorkerOptions) (kernelworker.Handle, error) {
		if err := sctx.Err(); err != nil {
			return kernelworker.Handle{}, fmt.Errorf("%w: %w", kernelworker.ErrStartupFailed, err)
		}
		opts := base
		opts.Key, opts.Generation = key, generation
		opts.Cwd, opts.Interpreter = key.Cwd, wo.InterpreterConfigured
		opts.HelperSource = wo.HelperSource
		opts.MaxQueuedCells, opts.MaxOutputBytes, opts.Limits = wo.MaxQueuedCells, wo.MaxOutputBytes, wo.Limits
		report := &exitReport{}
		opts.OnExit = report.chain(base.OnExit)
		// The boot runs here, on the registry's start goroutine, so boots
		// of different keys overlap; only the spawn of the worker actor
		// goes through the supervisor, which adopts it.
		h, err := kernelworker.Start(childSpawner{sys: sys, supervisor: workers}, opts)
		if err == nil && h.PID != nil {
			// Booked before the registry learns of the worker, so before
			// it can handle the worker's Terminated.
			exits.book(h.PID, report)
		}
		return h, err
	}
	if s.extension != nil {
		cfg.Starter = s.extension.Starter(childSpawner{sys: sys, supervisor: workers}, cfg.Starter)
	}
	s.tree.workers = workers
	s.tree.registry = ctx.Spawn(registryProps(cfg))
	close(s.ready)
}

// registryProps builds the registry's props; tests wrap it to inject a
// crash.
var registryProps = registry.Props

// stopDecider makes kernel workers temporary: a failed worker is stopped,
// never restarted (its interpreter's state is gone anyway).
func stopDecider(any) actor.Directive { return actor.StopDirective }

// workersSupervisor is the dynamic supervisor of kernel workers.
type workersSupervisor struct{}

func (w *workersSupervisor) Receive(ctx actor.Context) {
	if msg, ok := ctx.Message().(*spawnChild); ok {
		pid, err := ctx.SpawnNamed(msg.props, msg.name)
		ctx.Respond(&spawnedChild{pid: pid, err: err})
	}
}

var _ actor.SpawnerContext = childSpawner{}

// childSpawner is the workers supervisor as the parent kernelworker.Start
// spawns a worker under, for use off the supervisor's goroutine: each
// spawn is a request the supervisor answers at once, so a slow boot
// never holds its mailbox.
type childSpawner struct {
	sys        *actor.ActorSystem
	supervisor *actor.PID
}

func (s childSpawner) Parent() *actor.PID              { return nil }
func (s childSpawner) Self() *actor.PID                { return s.supervisor }
func (s childSpawner) Actor() actor.Actor              { return nil }
func (s childSpawner) ActorSystem() *actor.ActorSystem { return s.sys }
func (s childSpawner) Logger() *slog.Logger            { return s.sys.Logger() }

func (s childSpawner) Spawn(props *actor.Props) *actor.PID {
	return s.SpawnPrefix(props, "")
}

func (s childSpawner) SpawnPrefix(props *actor.Props, prefix string) *actor.PID {
	pid, _ := s.SpawnNamed(props, prefix+s.sys.ProcessRegistry.NextId())
	return pid
}

func (s childSpawner) SpawnNamed(props *actor.Props, name string) (*actor.PID, error) {
	res, err := s.sys.Root.RequestFuture(s.supervisor, &spawnChild{props: props, name: name}, spawnTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("workers supervisor: %w", err)
	}
	sp, ok := res.(*spawnedChild)
	if !ok {
		return nil, fmt.Errorf("workers supervisor answered %T", res)
	}
	return sp.pid, sp.err
}
