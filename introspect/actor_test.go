package introspect

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/telemetry"
)

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	t.Cleanup(sys.Shutdown)
	return sys
}

// fakeRegistry answers SnapshotRequest with snap, after gate (if set) is
// closed, counting the requests.
type fakeRegistry struct {
	snap  *registry.Snapshot
	gate  chan struct{}
	asked *atomic.Int64
}

func (f *fakeRegistry) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*registry.SnapshotRequest); ok {
		f.asked.Add(1)
		if f.gate != nil {
			<-f.gate
		}
		ctx.Respond(f.snap)
	}
}

func TestTheActorAnswersWithTheRegistryAggregateAndItsOwnFigures(t *testing.T) {
	sys := newSystem(t)
	var asked atomic.Int64
	reg := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fakeRegistry{asked: &asked, snap: &registry.Snapshot{
			Live: 2, Max: 4, Available: 2, Phases: map[string]int{"idle": 1, "running": 1},
			InflightCells: 3, QueuedCells: 2, DeepestQueue: 2, Owners: 2, ForkedOwners: 1,
			IdleTimeout: time.Minute, ReapInterval: time.Second,
		}}
	}))
	j := NewJournal(1)
	j.Handle(telemetry.CellStop{DroppedLateOutput: 9})
	pid := sys.Root.Spawn(Props(Config{Registry: reg, QueueCapacity: 8, Journal: j}))
	s, err := NewClient(sys.Root, pid).Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Snapshot{
		Capacity:      Capacity{Live: 2, Max: 4, Available: 2},
		Phases:        map[string]int{"starting": 0, "idle": 1, "running": 1, "cancelling": 0, "stopping": 0, "unreachable": 0},
		InflightCells: 3,
		Queues:        Queues{Queued: 2, Deepest: 2, Capacity: 8},
		Owners:        2, ForkedOwners: 1,
		Reap:                   Reap{IdleTimeoutMS: 60000, IntervalMS: 1000},
		DroppedLateOutputBytes: 9,
	}, s)
}

// Readers that arrive while a registry query is in flight share its
// answer instead of queueing one query each behind it.
func TestConcurrentReadersShareOneRegistryQuery(t *testing.T) {
	sys := newSystem(t)
	var asked atomic.Int64
	gate := make(chan struct{})
	reg := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fakeRegistry{asked: &asked, gate: gate, snap: &registry.Snapshot{Live: 1, Max: 2, Available: 1}}
	}))
	pid := sys.Root.Spawn(Props(Config{Registry: reg}))
	const readers = 50
	futures := make([]*actor.Future, readers)
	for i := range futures {
		futures[i] = sys.Root.RequestFuture(pid, &snapshotRequest{}, 10*time.Second)
	}
	require.Eventually(t, func() bool { return asked.Load() == 1 }, 10*time.Second, time.Millisecond)
	close(gate)
	var wg sync.WaitGroup
	for _, f := range futures {
		wg.Go(func() {
			res, err := f.Result()
			if assert.NoError(t, err) {
				assert.Equal(t, 1, res.(*snapshotReply).Snapshot.Capacity.Live)
			}
		})
	}
	wg.Wait()
	assert.Less(t, asked.Load(), int64(readers))
}

func TestASilentRegistryIsReportedUnavailableAndDoesNotWedgeTheActor(t *testing.T) {
	sys := newSystem(t)
	var asked atomic.Int64
	gate := make(chan struct{})
	reg := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fakeRegistry{asked: &asked, gate: gate, snap: &registry.Snapshot{Live: 1, Max: 2, Available: 1}}
	}))
	pid := sys.Root.Spawn(Props(Config{Registry: reg, Timeout: 50 * time.Millisecond}))
	_, err := NewClient(sys.Root, pid).Snapshot(context.Background())
	assert.ErrorIs(t, err, ErrUnavailable)
	close(gate)
	s, err := NewClient(sys.Root, pid).Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, s.Capacity.Live)

	none := sys.Root.Spawn(Props(Config{}))
	_, err = NewClient(sys.Root, none).Snapshot(context.Background())
	assert.ErrorIs(t, err, ErrUnavailable)
}

func TestEmptyIsTheSettingsWithZeroCounts(t *testing.T) {
	s := Empty(Settings{MaxLiveKernels: 4, IdleTimeout: time.Minute, ReapInterval: time.Second, QueueCapacity: 8})
	assert.Equal(t, Capacity{Max: 4, Available: 4}, s.Capacity)
	assert.Equal(t, Queues{Capacity: 8}, s.Queues)
	assert.Equal(t, Reap{IdleTimeoutMS: 60000, IntervalMS: 1000}, s.Reap)
	assert.Len(t, s.Phases, len(Phases))
}
