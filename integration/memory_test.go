package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/introspect"
)

// What a long-lived host keeps per session and per cell, once the calls
// have ended: the live heap (HeapAlloc after a full collection). HeapInuse
// would also count the free room of partly used spans, which follows
// allocation patterns rather than what is kept.
const (
	// memorySoakLength is how many cycles (and, apart, cells) `make soak`
	// runs (MEMORY_CYCLES, MEMORY_CELLS); memoryBound is the heap growth
	// allowed over that many.
	memorySoakLength = 10000
	memoryBound      = 1 << 20
	// `make test` runs a scaled-down version: fewer cycles and cells, and
	// a bound and a lifecycle journal scaled alike.
	defaultMemoryCycles = 200
	defaultMemoryCells  = 2000
	// memoryWarmup cycles or cells start the kernel subsystem before the
	// baseline.
	memoryWarmup = 20
	// heapBatch cycles or cells make one benchmark op, so that even
	// `-benchtime 1x` divides the growth by a hundred.
	heapBatch = 100
	// benchJournal is the lifecycle journal of a benchmark's runtime: a
	// fixed ring, so a small one, wrapped during the warm-up, makes the
	// figure the steady state at once.
	benchJournal = 16
)

const (
	noteBody = "a note"
	// memoryCell touches every part of a cell: the bridge (a helper call,
	// a notification, a text() block) and the kernel.
	memoryCell = "n = read('note.txt')\nnotify('cell')\ntext(n.split('\\t')[-1])\n"
)

func memoryCount(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}

// memoryEnv is a session runtime for heap figures, closed by the usual
// leak checks; journal sets the lifecycle journal's size.
func memoryEnv(t *testing.T, journal int) *executecode.Runtime {
	return sessionEnv(t, map[string]string{"note.txt": noteBody + "\n"},
		withRuntimeOption(executecode.WithLifecycleEntries(journal))).rt
}

// benchRuntime is memoryEnv for a benchmark.
func benchRuntime(b *testing.B) *executecode.Runtime {
	root := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(root, "note.txt"), []byte(noteBody+"\n"), 0o644))
	cfg := config.Defaults()
	cfg.Enabled, cfg.KernelMode = true, config.Session
	rt, err := executecode.New(cfg, executecode.WithRoot(root), executecode.WithTmpDir(b.TempDir()),
		executecode.WithLifecycleEntries(benchJournal))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, rt.Close(context.Background())) })
	return rt
}

// memoryCellOn runs memoryCell as a call of o and checks it ran on a
// kernel.
func memoryCellOn(tb testing.TB, rt *executecode.Runtime, o *executecode.Owner) {
	res, err := rt.Execute(context.Background(), executecode.Call{Script: memoryCell, Owner: o, Notify: func(string) {}})
	require.NoError(tb, err)
	require.True(tb, res.Details.Persistent, res.Text())
	require.Equal(tb, []string{noteBody}, res.Blocks, res.Text())
}

// sessionCycle attaches a session, runs one cell on its new kernel and
// detaches, which stops the kernel.
func sessionCycle(tb testing.TB, rt *executecode.Runtime, i int) {
	o, err := rt.Attach(context.Background(), executecode.Scope{SessionID: "cycle-" + strconv.Itoa(i), AgentID: "main"})
	require.NoError(tb, err)
	memoryCellOn(tb, rt, o)
	require.NoError(tb, o.Detach(context.Background()))
}

// quiet waits until every kernel the runtime stopped is gone and no cell
// is in flight; kernels holds how many stay live (0 or 1 here).
func quiet(tb testing.TB, rt *executecode.Runtime, kernels int) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		s, err := rt.Snapshot(context.Background())
		require.NoError(tb, err)
		return s.Capacity.Live == kernels && s.Phases["unreachable"] == 0 && s.InflightCells == 0
	}, 10*time.Second, 10*time.Millisecond, "the runtime quiets down")
}

// heapGrowth is what a run of ops left on the heap.
type heapGrowth struct {
	ops           int
	before, after memFigures
}

func (g heapGrowth) bytes() int64   { return g.after.heap - g.before.heap }
func (g heapGrowth) objects() int64 { return g.after.objects - g.before.objects }
func (g heapGrowth) per(v int64) float64 {
	return float64(v) / float64(g.ops)
}

func (g heapGrowth) String() string {
	return fmt.Sprintf("heap %d -> %d B (%+d B, %+.1f B and %+.3f objects each), RSS %d -> %d KiB (%+.0f B each)",
		g.before.heap, g.after.heap, g.bytes(), g.per(g.bytes()), g.per(g.objects()),
		g.before.rss>>10, g.after.rss>>10, g.per(g.after.rss-g.before.rss))
}

// heapOver measures what n calls of op leave on the heap once the runtime
// is quiet again.
func heapOver(tb testing.TB, rt *executecode.Runtime, kernels, n int, op func(i int)) heapGrowth {
	tb.Helper()
	quiet(tb, rt, kernels)
	g := heapGrowth{ops: n, before: settledMemory()}
	for i := range n {
		op(i)
	}
	quiet(tb, rt, kernels)
	g.after = settledMemory()
	return g
}

// scaledJournal keeps the lifecycle journal in proportion to a run of n
// against the soak length, like the bound: between one entry and the
// default size.
func scaledJournal(n int) int {
	return min(max(introspect.DefaultJournalSize*n/memorySoakLength, 1), introspect.DefaultJournalSize)
}

// scaledBound is memoryBound for a run of n, but at least runtimeSlack.
func scaledBound(n int) int64 {
	return max(int64(memoryBound)*int64(n)/memorySoakLength, runtimeSlack)
}

// runtimeSlack is room for the Go runtime's own caches, which follow the
// machine's concurrency peaks rather than the number of cycles: an OS
// thread started while others block in a syscall (about 3 KiB each, kept
// for good) and the per-P caches of channel waiters. Tens of KiB on a busy
// machine.
const runtimeSlack = 64 << 10

// A host that attaches, runs a cell and detaches for ever keeps nothing of
// each cycle: MEMORY_CYCLES cycles (each a kernel of its own) grow the
// heap by less than 1 MiB per 10,000. The lifecycle journal, a fixed ring,
// fills within the run and counts against the bound.
func TestSessionCyclesKeepTheHeapFlat(t *testing.T) {
	n := memoryCount(t, "MEMORY_CYCLES", defaultMemoryCycles)
	rt := memoryEnv(t, scaledJournal(n))
	for i := range memoryWarmup {
		sessionCycle(t, rt, -1-i)
	}
	g := heapOver(t, rt, 0, n, func(i int) { sessionCycle(t, rt, i) })
	t.Logf("%d attach/execute/detach cycles: %s", n, g)
	assert.Less(t, g.bytes(), scaledBound(n), "heap growth over %d cycles", n)
}

// Cells on one kernel keep nothing either: MEMORY_CELLS cells grow the
// heap by less than 1 MiB per 10,000.
func TestCellsOnOneKernelKeepTheHeapFlat(t *testing.T) {
	n := memoryCount(t, "MEMORY_CELLS", defaultMemoryCells)
	rt := memoryEnv(t, scaledJournal(n))
	o, err := rt.Attach(context.Background(), executecode.Scope{SessionID: "cells", AgentID: "main"})
	require.NoError(t, err)
	defer func() { require.NoError(t, o.Detach(context.Background())) }()
	for range memoryWarmup {
		memoryCellOn(t, rt, o)
	}
	g := heapOver(t, rt, 1, n, func(int) { memoryCellOn(t, rt, o) })
	t.Logf("%d cells on one kernel: %s", n, g)
	assert.Less(t, g.bytes(), scaledBound(n), "heap growth over %d cells", n)
}

// reportHeap reports a benchmark's growth per cycle or cell.
func reportHeap(b *testing.B, g heapGrowth, unit string) {
	b.ReportMetric(g.per(g.bytes()), "heap-B/"+unit)
	b.ReportMetric(g.per(g.objects()), "heap-objs/"+unit)
	b.ReportMetric(g.per(g.after.rss-g.before.rss), "rss-B/"+unit)
	b.Logf("%d %ss: %s", g.ops, unit, g)
}

// BenchmarkSessionCycleHeap reports what an attach/execute/detach cycle
// leaves on the heap in the steady state. One op is heapBatch cycles.
func BenchmarkSessionCycleHeap(b *testing.B) {
	rt := benchRuntime(b)
	for i := range memoryWarmup {
		sessionCycle(b, rt, -1-i)
	}
	next := 0
	quiet(b, rt, 0)
	before := settledMemory()
	for b.Loop() {
		for range heapBatch {
			sessionCycle(b, rt, next)
			next++
		}
	}
	quiet(b, rt, 0)
	reportHeap(b, heapGrowth{ops: next, before: before, after: settledMemory()}, "cycle")
}

// BenchmarkSessionCellHeap reports what a cell on a reused kernel leaves
// on the heap in the steady state. One op is heapBatch cells.
func BenchmarkSessionCellHeap(b *testing.B) {
	rt := benchRuntime(b)
	o, err := rt.Attach(context.Background(), executecode.Scope{SessionID: "cells", AgentID: "main"})
	require.NoError(b, err)
	defer func() { require.NoError(b, o.Detach(context.Background())) }()
	for range memoryWarmup {
		memoryCellOn(b, rt, o)
	}
	cells := 0
	quiet(b, rt, 1)
	before := settledMemory()
	for b.Loop() {
		for range heapBatch {
			memoryCellOn(b, rt, o)
			cells++
		}
	}
	quiet(b, rt, 1)
	reportHeap(b, heapGrowth{ops: cells, before: before, after: settledMemory()}, "cell")
}
