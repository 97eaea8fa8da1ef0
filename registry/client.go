package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// clientTimeout bounds one request when ctx ends no sooner: an acquire
// may wait for a kernel's boot (its 10 s startup deadline), a reset for a
// stuck kernel's 15 s stop.
const clientTimeout = 20 * time.Second

// Client is the handle of a registry actor spawned from Props: callers
// acquire, release and reset kernels through it and never build the
// registry's messages. Every call waits at most until its ctx ends; a
// registry that is gone, or does not answer in time, is an error
// wrapping ErrUnavailable.
type Client struct {
	root *actor.RootContext
	pid  *actor.PID
}

// NewClient wraps the registry actor pid.
func NewClient(root *actor.RootContext, pid *actor.PID) *Client {
	return &Client{root: root, pid: pid}
}

// Owner is a session's hold on kernels, from Attach to Detach. The
// registry watches its actor: the owner's Detach, or its actor's end, is
// how its kernels learn it is gone.
type Owner struct{ pid *actor.PID }

// ownerActor is the do-nothing actor behind an Owner: its only job is to
// exist until Detach, so the registry can watch it like any owner.
type ownerActor struct{}

func (ownerActor) Receive(actor.Context) {}

var ownerProps = actor.PropsFromProducer(func() actor.Actor { return ownerActor{} })

// AcquireRequest asks for a kernel for Key on behalf of Owner. Caller is
// the calling operation: when it is done, the lease ends; it should end
// no later than the ctx of the Acquire, or a lease granted after the
// caller gave up waiting lives until it does. MaxLiveKernels and
// IdleTimeout are this request's bounds; zero takes the registry's, a
// negative IdleTimeout means never.
type AcquireRequest struct {
	Key            Key
	Owner          *Owner
	Caller         context.Context
	MaxLiveKernels int
	IdleTimeout    time.Duration
	Worker         WorkerOptions
}

// ResetResult: Performed says some state was discarded, Forked that the
// owner's next acquires of the key go to its own fork.
type ResetResult struct {
	Performed bool
	Forked    bool
}

// Attach makes a new owner.
func (c *Client) Attach(ctx context.Context) (*Owner, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	return &Owner{pid: c.root.Spawn(ownerProps)}, nil
}

// Detach removes o from every kernel and forgets its forks (queued cells
// leave their queues, a kernel running o's cell is discarded, a kernel
// nobody else owns stops), then ends o's actor.
func (c *Client) Detach(ctx context.Context, o *Owner) error {
	if o == nil {
		return nil
	}
	_, err := request[*detachReply](ctx, c, &detachMsg{Owner: o.pid})
	_ = c.root.StopFuture(o.pid).Wait()
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	return nil
}

// Acquire checks out a kernel for req.Key, starting one if needed.
// Its errors wrap ErrCapacityExhausted, ErrStartupFailed,
// ErrInvalidRequest, ErrShutdown or ErrUnavailable, or the caller's
// cancellation.
func (c *Client) Acquire(ctx context.Context, req AcquireRequest) (Allocation, error) {
	if req.Owner == nil {
		return Allocation{}, fmt.Errorf("acquire: %w: no owner", ErrInvalidRequest)
	}
	rep, err := request[*acquireReply](ctx, c, &acquireMsg{
		Key: req.Key, Owner: req.Owner.pid, Caller: req.Caller,
		MaxLiveKernels: req.MaxLiveKernels, IdleTimeout: req.IdleTimeout, Worker: req.Worker,
	})
	if err != nil {
		return Allocation{}, fmt.Errorf("acquire: %w", err)
	}
	return rep.Allocation, rep.Err
}

// Release ends a lease (see releaseMsg).
func (c *Client) Release(ctx context.Context, l Lease) error {
	rep, err := request[*releaseReply](ctx, c, &releaseMsg{Lease: l})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return rep.Err
}

// ReleaseNoWait is Release without waiting for the answer, which a
// lease the registry issued never needs: the registry handles it before
// anything sent after it returns (its mailbox keeps their order), so the
// caller's next Acquire, Snapshot or Detach sees the lease released. A
// registry that is gone drops it, as it dropped the lease.
func (c *Client) ReleaseNoWait(l Lease) {
	c.root.Send(c.pid, &releaseMsg{Lease: l})
}

// Reset discards o's state for key (see resetMsg). Its error wraps
// ErrStopFailed when the old kernel could not be confirmed gone.
func (c *Client) Reset(ctx context.Context, key Key, o *Owner) (ResetResult, error) {
	if o == nil {
		return ResetResult{}, fmt.Errorf("reset: %w: no owner", ErrInvalidRequest)
	}
	rep, err := request[*resetReply](ctx, c, &resetMsg{Key: key, Owner: o.pid})
	if err != nil {
		return ResetResult{}, fmt.Errorf("reset: %w", err)
	}
	return ResetResult{Performed: rep.Performed, Forked: rep.Forked}, rep.Err
}

// StopAll stops every kernel as a shutdown (see stopAllMsg).
func (c *Client) StopAll(ctx context.Context) error {
	rep, err := request[*stopAllReply](ctx, c, &stopAllMsg{})
	if err != nil {
		return fmt.Errorf("stop all: %w", err)
	}
	return rep.Err
}

// Snapshot is the registry's aggregate (see Snapshot).
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	rep, err := request[*Snapshot](ctx, c, &SnapshotRequest{})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return *rep, nil
}

// ask sends msg with a reply channel of its own and waits for the
// answer. The registry never blocks on the channel (it holds one answer),
// so nothing is left behind when the caller stops waiting.
func request[T any](ctx context.Context, c *Client, msg interface{ setReply(chan<- any) }) (T, error) {
	var zero T
	if _, ok := c.root.ActorSystem().ProcessRegistry.Get(c.pid); !ok {
		return zero, fmt.Errorf("%w: %w", ErrUnavailable, errRegistryStopped)
	}
	ch := make(chan any, 1)
	msg.setReply(ch)
	c.root.Send(c.pid, msg)
	t := time.NewTimer(clientTimeout)
	defer t.Stop()
	select {
	case res := <-ch:
		v, ok := res.(T)
		if !ok {
			return zero, fmt.Errorf("%w: answered %T", ErrUnavailable, res)
		}
		return v, nil
	case <-ctx.Done():
		return zero, fmt.Errorf("%w: %w", ErrUnavailable, context.Cause(ctx))
	case <-t.C:
		return zero, fmt.Errorf("%w: no answer in %v", ErrUnavailable, clientTimeout)
	}
}
