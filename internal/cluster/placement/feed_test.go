package placement

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/membership"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/registry"
)

// chanFeed is a membership feed whose events the test sends; the etcd
// feed itself is tested against a real etcd (membership) and end to end
// with the runtime (cmd/execute-code).
type chanFeed struct{ ch chan membership.Event }

func (f chanFeed) Watch(ctx context.Context) (<-chan membership.Event, error) {
	out := make(chan membership.Event)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-f.ch:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// newSystem is an actor system with a remote of its own on loopback.
func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	rem := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	rem.Start()
	t.Cleanup(func() {
		rem.Shutdown(true)
		sys.Shutdown()
	})
	return sys
}

// feedHarness is a session side that reads feed and hears no hello, and a
// kernelhost that says none, in one actor system.
type feedHarness struct {
	*harness
	feed chanFeed
	inc  string
}

func newFeedHarness(t *testing.T) *feedHarness {
	t.Helper()
	sys := newSystem(t)
	feed := chanFeed{ch: make(chan membership.Event)}
	c, err := Start(sys, Config{StartTimeout: 5 * time.Second, StopTimeout: time.Second, Feed: feed})
	require.NoError(t, err)
	h := &feedHarness{harness: &harness{sys: sys, cluster: c, host: &testHost{}}, feed: feed}
	h.node, h.inc, err = kernelhost.Start(sys, kernelhost.Config{Host: h.host, Capacity: 2})
	require.NoError(t, err)
	h.starter = c.Starter(sys.Root, func(context.Context, registry.Key, uint64, registry.WorkerOptions) (kernelworker.Handle, error) {
		return kernelworker.Handle{}, fmt.Errorf("no local kernels in this test")
	})
	h.key, err = registry.NewKey("s", "a", t.TempDir(), "/usr/bin/python3", nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
		sys.Root.StopFuture(h.node).Wait()
		sys.Root.StopFuture(c.directory).Wait()
	})
	return h
}

func (h *feedHarness) send(kind membership.Kind, m membership.Member) {
	h.feed.ch <- membership.Event{Kind: kind, Member: m}
}

// waitCapacity waits until the directory lists one node of capacity n,
// or none for 0.
func (h *feedHarness) waitCapacity(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return h.cluster.Capacity() == n && h.nodes(t)[0].Capacity == n
	}, 5*time.Second, 5*time.Millisecond, "want capacity %d, have %v", n, h.nodes(t))
}

func TestTheFeedsMembersAreNodesOfTheDirectory(t *testing.T) {
	h := newFeedHarness(t)
	addr := h.node.Address
	me := membership.Member{Address: addr, Incarnation: h.inc, Capacity: 2}

	// Joined is a hello: the node takes kernels.
	h.send(membership.Joined, me)
	h.waitCapacity(t, 2)
	proxy := h.start(t)
	assert.Equal(t, "cell 1", h.run(t, proxy, "", nil).Output)

	// Updated changes the capacity the registry's cap follows.
	h.send(membership.Updated, membership.Member{Address: addr, Incarnation: h.inc, Capacity: 3})
	h.waitCapacity(t, 3)

	// The feed failing changes nothing.
	h.feed.ch <- membership.Event{Kind: membership.Failed, Err: membership.ErrUnavailable}
	h.feed.ch <- membership.Event{Kind: membership.Recovered}
	h.waitCapacity(t, 3)

	// A Left of another incarnation is not this node's.
	h.send(membership.Left, membership.Member{Address: addr, Incarnation: "older", Capacity: 3})
	h.waitCapacity(t, 3)

	// Left of the incarnation held: no kernel is placed there any more,
	// and the start says the capacity is exhausted.
	h.send(membership.Left, membership.Member{Address: addr, Incarnation: h.inc, Capacity: 3})
	h.waitCapacity(t, 0)
	_, err := h.starter(context.Background(), h.key, 2, registry.WorkerOptions{})
	require.ErrorIs(t, err, ErrNoNode)
	require.ErrorIs(t, err, registry.ErrCapacityExhausted)

	// Another incarnation at the address is a new node.
	h.send(membership.Joined, membership.Member{Address: addr, Incarnation: "restarted", Capacity: 1})
	h.waitCapacity(t, 1)
}

// A node the directory saw go while the feed still lists it is watched
// again after a pause: one that was only cut off comes back without a
// word from the feed.
func TestALostNodeTheFeedStillListsIsWatchedAgain(t *testing.T) {
	h := newFeedHarness(t)
	me := membership.Member{Address: h.node.Address, Incarnation: h.inc, Capacity: 2}
	h.send(membership.Joined, me)
	h.waitCapacity(t, 2)

	h.sys.Root.StopFuture(h.node).Wait()
	h.waitCapacity(t, 0)
	var err error
	h.node, _, err = kernelhost.Start(h.sys, kernelhost.Config{Host: h.host, Capacity: 2})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.cluster.Capacity() == 2 }, 10*time.Second, 10*time.Millisecond,
		"the node is back in the directory")
	proxy := h.start(t)
	assert.Equal(t, "cell 1", h.run(t, proxy, "", nil).Output)
}
