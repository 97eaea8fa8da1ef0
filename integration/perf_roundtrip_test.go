package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// perfRoundTripScript makes CALLS sequential read() calls of a small file
// and reports the median and p99 of their wall time in ns, measured
// inside python.
const perfRoundTripScript = `
import time
lat = []
for _ in range(CALLS):
    t = time.perf_counter_ns()
    read("small.txt")
    lat.append(time.perf_counter_ns() - t)
lat.sort()
text("%d %d" % (lat[len(lat) // 2], lat[len(lat) * 99 // 100]))
`

const perfRoundTripCalls = 300

var smallFile = map[string]string{"small.txt": "hello\nworld\n"}

// BenchmarkPerfHelperRoundTrip: one helper call's round trip (a
// sequential read() of a small file, timed inside python, median of
// 300 in one per-call run) against the pipe floor, and against the file
// floor: the file operations and wake-ups the file contract itself asks
// of a call (measureFileFloor).
func BenchmarkPerfHelperRoundTrip(b *testing.B) {
	e := newPerfEnv(b, smallFile, func(c *config.Config) { c.MaxRPCCalls = perfRoundTripCalls + 10 })
	python := perfPython(b)
	script := strings.ReplaceAll(perfRoundTripScript, "CALLS", strconv.Itoa(perfRoundTripCalls))
	for b.Loop() {
		f := measureFloor(b, python)
		files := measureFileFloor(b, python, e.tmp)
		med, p99 := nsPair(b, e.run(script))
		reportFloor(b, f)
		b.ReportMetric(files, "file-floor-us")
		b.ReportMetric(med/1000, "roundtrip-median-us")
		b.ReportMetric(p99/1000, "roundtrip-p99-us")
		b.ReportMetric(med/1000/f.rttUS, "roundtrip/floor-ratio")
		b.ReportMetric(med/1000/files, "roundtrip/file-floor-ratio")
	}
}

// run executes a per-call script and fails the benchmark unless it
// succeeded with one text() block.
func (e *perfEnv) run(script string) string {
	e.b.Helper()
	res, err := e.rt.Execute(context.Background(), executecode.Call{Script: script, TimeoutMS: 120000})
	require.NoError(e.b, err)
	require.True(e.b, res.Succeeded(), res.Text())
	require.Len(e.b, res.Blocks, 1, res.Text())
	return res.Blocks[0]
}

// nsPair reads the two integers a script reported.
func nsPair(b *testing.B, block string) (float64, float64) {
	b.Helper()
	f := strings.Fields(block)
	require.Len(b, f, 2, block)
	x, err := strconv.ParseFloat(f[0], 64)
	require.NoError(b, err)
	y, err := strconv.ParseFloat(f[1], 64)
	require.NoError(b, err)
	return x, y
}

// hostCPUCalls is how many helper calls one host CPU sample makes.
const hostCPUCalls = 300

// BenchmarkPerfHostCPU: the host's CPU (getrusage of this process, user
// plus system) per helper call, per call and in a session: a run making
// 300 read() calls less a run making none, over 300, the median of
// three pairs. The ratio is to the host's CPU per floor round trip.
func BenchmarkPerfHostCPU(b *testing.B) {
	python := perfPython(b)
	calls := fmt.Sprintf("for _ in range(%d):\n    read('small.txt')\ntext('ok')\n", hostCPUCalls)
	none := "text('ok')\n"
	edit := func(c *config.Config) { c.MaxRPCCalls = hostCPUCalls + 10 }
	perCall := newPerfEnv(b, smallFile, edit)
	session := newPerfEnv(b, smallFile, func(c *config.Config) { edit(c); c.KernelMode = config.Session })
	owner, err := session.rt.Attach(context.Background(), executecode.Scope{SessionID: "cpu", AgentID: "main"})
	require.NoError(b, err)
	defer func() { require.NoError(b, owner.Detach(context.Background())) }()
	session.cell(owner, none) // the kernel starts
	perCallRun := func(s string) { perCall.run(s) }
	cellRun := func(s string) { session.cell(owner, s) }
	perCallOf := func(run func(string)) float64 {
		var ds []time.Duration
		for range 3 {
			c0 := hostCPU()
			run(calls)
			c1 := hostCPU()
			run(none)
			c2 := hostCPU()
			ds = append(ds, (c1-c0)-(c2-c1))
		}
		return us(median(ds)) / hostCPUCalls
	}
	for b.Loop() {
		f := measureFloor(b, python)
		pc := perCallOf(perCallRun)
		sc := perCallOf(cellRun)
		reportFloor(b, f)
		b.ReportMetric(f.hostCPUUS, "floor-host-cpu-us")
		b.ReportMetric(pc, "percall-host-cpu-us/call")
		b.ReportMetric(sc, "session-host-cpu-us/call")
		b.ReportMetric(pc/f.hostCPUUS, "percall-cpu/floor-ratio")
		b.ReportMetric(sc/f.hostCPUUS, "session-cpu/floor-ratio")
	}
}

// cell runs script on owner's kernel and fails the benchmark unless it
// succeeded.
func (e *perfEnv) cell(owner *executecode.Owner, script string) executecode.Result {
	e.b.Helper()
	res, err := e.rt.Execute(context.Background(), executecode.Call{Script: script, Owner: owner, TimeoutMS: 120000})
	require.NoError(e.b, err)
	require.True(e.b, res.Succeeded(), res.Text())
	require.Empty(e.b, res.Details.FallbackReason, "the cell ran per call")
	return res
}

// perfBatchScript times, REPS times over, 20 sequential reads against
// one batch() of the same 20, then 20 sequential greps over the tree
// against one batch() of them; it reports the four medians in ns.
const perfBatchScript = `
import time
paths = ["f%02d.txt" % i for i in range(20)]
reads = [("read", {"path": p}) for p in paths]
greps = [("grep", {"pattern": "needle%02d" % i, "path": "tree"}) for i in range(20)]
def timed(f):
    t = time.perf_counter_ns()
    f()
    return time.perf_counter_ns() - t
def seq(calls):
    return lambda: [globals()[tool](**params) for tool, params in calls]
rs, rb, gs, gb = [], [], [], []
for _ in range(READ_REPS):
    rs.append(timed(seq(reads)))
    rb.append(timed(lambda: batch(reads)))
for _ in range(GREP_REPS):
    gs.append(timed(seq(greps)))
    gb.append(timed(lambda: batch(greps)))
med = lambda xs: sorted(xs)[len(xs) // 2]
text("%d %d %d %d" % (med(rs), med(rb), med(gs), med(gb)))
`

const (
	batchReadReps = 15
	batchGrepReps = 5
)

// batchTree is 20 small files to read and a tree for grep: 40 files of
// 200 lines, each pattern matching one line of one file.
func batchTree() map[string]string {
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("f%02d.txt", i)] = strings.Repeat("a line of text\n", 4)
	}
	for i := range 40 {
		var sb strings.Builder
		for l := range 200 {
			if l == 100 && i < 20 {
				fmt.Fprintf(&sb, "here is needle%02d\n", i)
				continue
			}
			fmt.Fprintf(&sb, "line %d of file %d, with nothing to find\n", l, i)
		}
		files[fmt.Sprintf("tree/d%d/file%02d.txt", i%4, i)] = sb.String()
	}
	return files
}

// BenchmarkPerfBatch: batch() of 20 cheap reads against 20 sequential
// reads, and 20 greps over a tree at max_parallel_rpc = 4 in one batch()
// against the 20 one after another, in one per-call run (medians timed
// inside python). The sequential form is each one's floor; the pipe
// floor is reported beside them.
func BenchmarkPerfBatch(b *testing.B) {
	calls := 20 * 2 * (batchReadReps + batchGrepReps)
	e := newPerfEnv(b, batchTree(), func(c *config.Config) {
		c.MaxRPCCalls = calls + 10
		c.MaxParallelRPC = 4
	})
	python := perfPython(b)
	script := strings.NewReplacer("READ_REPS", strconv.Itoa(batchReadReps), "GREP_REPS", strconv.Itoa(batchGrepReps)).Replace(perfBatchScript)
	for b.Loop() {
		f := measureFloor(b, python)
		out := strings.Fields(e.run(script))
		require.Len(b, out, 4)
		v := make([]float64, 4)
		for i, s := range out {
			n, err := strconv.ParseFloat(s, 64)
			require.NoError(b, err)
			v[i] = n / 1000
		}
		reportFloor(b, f)
		b.ReportMetric(v[0], "read20-sequential-us")
		b.ReportMetric(v[1], "read20-batch-us")
		b.ReportMetric(v[2], "grep20-sequential-us")
		b.ReportMetric(v[3], "grep20-batch-us")
		b.ReportMetric(v[1]/v[0], "read-batch/sequential-ratio")
		b.ReportMetric(v[3]/v[2], "grep-batch/sequential-ratio")
		b.ReportMetric(v[0]/20/f.rttUS, "read-sequential/floor-ratio")
	}
}
