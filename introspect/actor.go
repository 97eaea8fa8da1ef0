package introspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/registry"
)

// defaultTimeout bounds one registry query: the registry asks every
// worker for its status, and a worker that does not answer costs one
// status timeout (5 s).
const defaultTimeout = 10 * time.Second

// ErrUnavailable reports a snapshot that could not be taken: the
// registry, or the introspect actor, did not answer.
var ErrUnavailable = errors.New("introspection unavailable")

// Config configures the introspect actor.
type Config struct {
	// Registry is the registry actor the snapshot is asked of.
	Registry *actor.PID
	// QueueCapacity is the per-kernel queue bound in effect.
	QueueCapacity int
	// Journal, if set, supplies the dropped late output total.
	Journal *Journal
	// Timeout bounds one registry query; 0 means 10 seconds.
	Timeout time.Duration
}

// Props is the introspect actor. It answers each snapshotRequest with the
// registry's aggregate; requests that arrive while a query is in flight
// share its answer, so any number of concurrent readers (a scrape, a
// serve client, an embedder) costs the registry one query at a time. It
// waits without blocking its mailbox and keeps no kernel state, so a
// restart loses nothing.
func Props(cfg Config) *actor.Props {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	return actor.PropsFromProducer(func() actor.Actor { return &introspector{cfg: cfg} })
}

type introspector struct {
	cfg     Config
	waiters []*actor.PID
}

func (a *introspector) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *snapshotRequest, snapshotRequest:
		if ctx.Sender() == nil {
			return
		}
		a.waiters = append(a.waiters, ctx.Sender())
		if len(a.waiters) == 1 {
			a.query(ctx)
		}
	}
}

func (a *introspector) query(ctx actor.Context) {
	if a.cfg.Registry == nil {
		a.answer(ctx, &snapshotReply{Err: fmt.Errorf("%w: no registry", ErrUnavailable)})
		return
	}
	f := ctx.RequestFuture(a.cfg.Registry, &registry.SnapshotRequest{}, a.cfg.Timeout)
	ctx.ReenterAfter(f, func(res any, err error) {
		a.answer(ctx, a.reply(res, err))
	})
}

func (a *introspector) reply(res any, err error) *snapshotReply {
	if err != nil {
		return &snapshotReply{Err: fmt.Errorf("%w: registry: %w", ErrUnavailable, err)}
	}
	s, ok := res.(*registry.Snapshot)
	if !ok || s == nil {
		return &snapshotReply{Err: fmt.Errorf("%w: registry answered %T", ErrUnavailable, res)}
	}
	return &snapshotReply{Snapshot: fromRegistry(s, a.cfg.QueueCapacity, a.cfg.Journal.DroppedLateOutputBytes())}
}

func (a *introspector) answer(ctx actor.Context, r *snapshotReply) {
	for _, w := range a.waiters {
		ctx.Send(w, r)
	}
	a.waiters = nil
}

// Client is the handle of an introspect actor spawned from Props.
type Client struct {
	root *actor.RootContext
	pid  *actor.PID
}

// NewClient wraps the introspect actor pid.
func NewClient(root *actor.RootContext, pid *actor.PID) *Client {
	return &Client{root: root, pid: pid}
}

// Snapshot asks for the aggregate, waiting until ctx ends (at most
// defaultTimeout plus a second).
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	timeout := defaultTimeout + time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d), time.Millisecond))
	}
	res, err := c.root.RequestFuture(c.pid, &snapshotRequest{}, timeout).Result()
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r, ok := res.(*snapshotReply)
	if !ok {
		return Snapshot{}, fmt.Errorf("%w: answered %T", ErrUnavailable, res)
	}
	return r.Snapshot, r.Err
}
