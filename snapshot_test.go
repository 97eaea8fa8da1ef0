package executecode_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/introspect"
)

// consistent checks the invariants any snapshot holds, whatever the load.
func consistent(t *testing.T, s executecode.Snapshot, maxLive, sessions int) {
	t.Helper()
	assert.Equal(t, maxLive, s.Capacity.Max)
	assert.Equal(t, s.Capacity.Max-s.Capacity.Live, s.Capacity.Available)
	assert.LessOrEqual(t, s.Capacity.Live, maxLive)
	require.Len(t, s.Phases, len(introspect.Phases))
	valid := 0
	for _, p := range introspect.Phases {
		assert.GreaterOrEqual(t, s.Phases[p], 0, p)
		if p != "unreachable" {
			valid += s.Phases[p]
		}
	}
	assert.LessOrEqual(t, valid, s.Capacity.Live, "phases of valid statuses count live kernels only")
	assert.LessOrEqual(t, s.Capacity.Live, valid+s.Phases["unreachable"])
	assert.LessOrEqual(t, s.InflightCells, sessions, "each session runs one cell at a time")
	assert.LessOrEqual(t, s.Queues.Queued, s.InflightCells)
	assert.LessOrEqual(t, s.Queues.Deepest, s.Queues.Queued)
	assert.LessOrEqual(t, s.Queues.Deepest, s.Queues.Capacity)
	assert.LessOrEqual(t, s.Owners, sessions)
	assert.LessOrEqual(t, s.ForkedOwners, s.Owners)
}

// Many sessions run cells that call helpers while readers take snapshots
// as fast as they can: every snapshot is consistent, every cell gets its
// own right answer, and a cell that is running is never held up by them.
func TestSnapshotUnderConcurrentLoadIsConsistentAndNeverBlocksACell(t *testing.T) {
	const sessions, cells, maxLive = 6, 5, 8
	r := newRig(t, withCfg(func(c *config.Config) { c.MaxLiveKernels = maxLive }))
	writeFile(t, r.root, "a.txt", "alpha\n")

	stop := make(chan struct{})
	var taken atomic.Int64
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := r.rt.Snapshot(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				consistent(t, s, maxLive, sessions+1)
				taken.Add(1)
			}
		})
	}

	// A cell that runs until the test lets it go: snapshots keep coming
	// while it runs, and show it running.
	held := r.attach("held")
	gate := writeFile(t, r.root, "gate", "")
	heldDone := make(chan executecode.Result, 1)
	go func() {
		heldDone <- r.goRun(held, "import os, time\nn = 0\nwhile os.path.exists('gate'):\n    n += 1\n    time.sleep(0.005)\ntext(str(n > 0))")
	}()
	r.waitSnapshot(func(s executecode.Snapshot) bool { return s.Phases["running"] >= 1 }, "the held cell runs")
	before := taken.Load()
	r.waitSnapshot(func(executecode.Snapshot) bool { return taken.Load() >= before+20 }, "snapshots keep coming")

	var cellsWG sync.WaitGroup
	for i := range sessions {
		cellsWG.Go(func() {
			o, err := r.rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprintf("s%d", i), AgentID: "main"})
			if !assert.NoError(t, err) {
				return
			}
			for j := range cells {
				res := r.goRun(o, fmt.Sprintf("v = %d * 100 + %d\nline = read('a.txt').splitlines()[0].split('\\t')[-1]\ntext(f'{line} {v}')", i, j))
				assert.Equal(t, []string{fmt.Sprintf("alpha %d", i*100+j)}, res.Blocks)
				assert.Empty(t, res.Details.FallbackReason)
			}
		})
	}
	cellsWG.Wait()
	require.NoError(t, removeFile(gate))
	res := <-heldDone
	assert.Equal(t, []string{"True"}, res.Blocks)
	assert.True(t, *res.Details.StateRetained)
	close(stop)
	readers.Wait()

	s := r.snapshot()
	consistent(t, s, maxLive, sessions+1)
	assert.Equal(t, sessions+1, s.Capacity.Live)
	assert.Equal(t, sessions+1, s.Phases["idle"])
	assert.Equal(t, 0, s.InflightCells)
	assert.Equal(t, sessions+1, s.Owners)
	t.Logf("%d snapshots taken under load", taken.Load())
}

func TestASnapshotReportsTheConfigurationInEffect(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) {
		c.MaxLiveKernels, c.MaxQueuedCellsPerKernel, c.KernelIdleTimeoutMS = 3, 5, 90000
	}))
	fresh := r.snapshot()
	assert.Equal(t, executecode.Snapshot{
		Capacity: executecode.SnapshotCapacity{Max: 3, Available: 3},
		Phases:   map[string]int{"starting": 0, "idle": 0, "running": 0, "cancelling": 0, "stopping": 0, "unreachable": 0},
		Queues:   introspect.Queues{Capacity: 5},
		Reap:     executecode.SnapshotReap{IdleTimeoutMS: 90000, IntervalMS: 60000},
	}, fresh)
	o := r.attach("s")
	r.run(o, "x = 1")
	s := r.snapshot()
	assert.Equal(t, executecode.SnapshotCapacity{Live: 1, Max: 3, Available: 2}, s.Capacity)
	assert.Equal(t, 1, s.Phases["idle"])
	assert.Equal(t, 1, s.Owners)
	assert.Equal(t, introspect.Queues{Capacity: 5}, s.Queues)
	assert.Equal(t, fresh.Reap, s.Reap)
}

// A queued cell shows in the snapshot's queues.
func TestSnapshotCountsCellsWaitingBehindARunningOne(t *testing.T) {
	r := newRig(t)
	a, b := r.attach("shared"), r.coAttach("shared")
	gate := writeFile(t, r.root, "gate", "")
	done := make(chan struct{}, 2)
	go func() {
		r.goRun(a, "import os, time\nwhile os.path.exists('gate'):\n    time.sleep(0.005)\n")
		done <- struct{}{}
	}()
	r.waitSnapshot(func(s executecode.Snapshot) bool { return s.Phases["running"] == 1 }, "a's cell runs")
	go func() { r.goRun(b, "x = 1"); done <- struct{}{} }()
	s := r.waitSnapshot(func(s executecode.Snapshot) bool { return s.Queues.Queued == 1 }, "b's cell waits")
	assert.Equal(t, 1, s.Queues.Deepest)
	assert.Equal(t, 2, s.InflightCells)
	assert.Equal(t, 1, s.Capacity.Live, "co-owners share one kernel")
	require.NoError(t, removeFile(gate))
	<-done
	<-done
	r.waitSnapshot(func(s executecode.Snapshot) bool { return s.Queues.Queued == 0 && s.InflightCells == 0 }, "all done")
}

func TestLifecycleKeepsABoundedRingOfTheLatestEntries(t *testing.T) {
	r := newRig(t, withOption(executecode.WithLifecycleEntries(4)))
	o := r.attach("s")
	for range 3 {
		r.run(o, "x = 1")
	}
	r.expectTrace("session.start live=1", "cell.start", "cell.stop(ok)", "cell.start", "cell.stop(ok)",
		"cell.start", "cell.stop(ok)")
	entries := r.rt.Lifecycle()
	require.Len(t, entries, 4)
	var seqs []uint64
	var names []string
	for _, e := range entries {
		seqs = append(seqs, e.Seq)
		names = append(names, e.Event)
	}
	assert.Equal(t, []uint64{4, 5, 6, 7}, seqs, "the oldest are overwritten")
	assert.Equal(t, []string{"cell_started", "cell_stopped", "cell_started", "cell_stopped"}, names)

	off := newRig(t, withOption(executecode.WithLifecycleEntries(0)))
	off.run(off.attach("s"), "x = 1")
	assert.Empty(t, off.rt.Lifecycle(), "introspection records can be turned off")
}

func TestAClosedRuntimeHasNoSnapshot(t *testing.T) {
	cfg := config.Defaults()
	rt, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()), executecode.WithTmpDir(t.TempDir()))
	require.NoError(t, err)
	require.NoError(t, rt.Close(context.Background()))
	_, err = rt.Snapshot(context.Background())
	assert.ErrorIs(t, err, executecode.ErrClosed)
}
