package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
)

// roundTripScript makes n sequential read() calls and reports the median
// and p99 of their wall time in microseconds, measured inside python.
const roundTripScript = `
import time
lat = []
for _ in range(CALLS):
    t = time.perf_counter_ns()
    read("small.txt")
    lat.append(time.perf_counter_ns() - t)
lat.sort()
text("%d %d" % (lat[len(lat) // 2] // 1000, lat[len(lat) * 99 // 100] // 1000))
`

// roundTrip runs the script on a runtime with its default staging (tmpDir
// "") or with workspaces under tmpDir, and returns python's median and p99
// of one call and the host's CPU time (user and system) over the run.
func roundTrip(b *testing.B, wakeups bool, calls int, tmpDir string) (median, p99 float64, cpu time.Duration) {
	root := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(root, "small.txt"), []byte("hello\nworld\n"), 0o644))
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.MaxRPCCalls = calls + 10
	opts := []executecode.Option{executecode.WithRoot(root), executecode.WithWakeups(wakeups)}
	if tmpDir != "" {
		opts = append(opts, executecode.WithTmpDir(tmpDir))
	}
	rt, err := executecode.New(cfg, opts...)
	require.NoError(b, err)
	defer rt.Close(context.Background())
	cpu0 := hostCPU()
	res, err := rt.Execute(context.Background(), executecode.Call{Script: strings.ReplaceAll(roundTripScript, "CALLS", strconv.Itoa(calls)), TimeoutMS: 120000})
	cpu = hostCPU() - cpu0
	require.NoError(b, err)
	require.Len(b, res.Blocks, 1, res.Text())
	f := strings.Fields(res.Blocks[0])
	median, _ = strconv.ParseFloat(f[0], 64)
	p99, _ = strconv.ParseFloat(f[1], 64)
	return median, p99, cpu
}

// hostCPU is this process's CPU time so far, user and system: the host's
// side of every helper call (python is a child, not counted).
func hostCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pingPong is python's side of the floor: N round trips of one byte, out
// on fd 3 and back on fd 4, as a helper call rings the request bell and
// waits on the response bell; it prints the median in microseconds.
const pingPong = `
import os, time
lat = []
for _ in range(N):
    t = time.perf_counter_ns()
    os.write(3, b"\x01")
    os.read(4, 1)
    lat.append(time.perf_counter_ns() - t)
lat.sort()
print(lat[len(lat) // 2] / 1000)
`

// pipeFloor is the physical floor of a helper call on this machine: one
// byte from python to the host and one back through two pipes, the host
// reading through its poller as it reads the request bell and answering
// at once, python timing n round trips on the runtime's interpreter.
func pipeFloor(b *testing.B, n int) float64 {
	python, err := proc.ResolvePython("")
	require.NoError(b, err)
	toR, toW, err := os.Pipe()
	require.NoError(b, err)
	fromR, fromW, err := os.Pipe()
	require.NoError(b, err)
	cmd := exec.Command(python, "-I", "-S", "-c", strings.ReplaceAll(pingPong, "N", strconv.Itoa(n)))
	var out strings.Builder
	cmd.Stdout = &out
	cmd.ExtraFiles = []*os.File{toW, fromR}
	require.NoError(b, cmd.Start())
	toW.Close()
	fromR.Close()
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		defer fromW.Close()
		buf := make([]byte, 1)
		for {
			if _, err := toR.Read(buf); err != nil {
				return
			}
			if _, err := fromW.Write(buf); err != nil {
				return
			}
		}
	}()
	err = cmd.Wait()
	toR.Close()
	<-echoed
	require.NoError(b, err)
	floor, err := strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
	require.NoError(b, err, out.String())
	return floor
}

// BenchmarkHelperRoundTrip measures one helper call's round trip with the
// doorbells and with the reference's polling (host 25 ms, shim 20 ms),
// side by side in one run, on the default staging (workspaces on a tmpfs
// when TMPDIR is unset) and with workspaces on the disk's temp directory,
// against the floor measured in the same run: a byte to python and back
// through pipes (pipeFloor). Fewer calls are made poll-only: each costs
// tens of milliseconds.
//
// A run's response files stay in its rpc directory until the run ends (they
// are removed with it); since the bell names each request the host opens it
// without listing, so 1,000 calls cost what 100 do. Runs within the default
// budget of 100 calls are measured too (the median of five such runs'
// medians): that is the round trip of the ratio. host-cpu-us/call is the
// host's CPU time per call, the difference of the 1,000-call and a
// 100-call run over the 900 calls between them.
func BenchmarkHelperRoundTrip(b *testing.B) {
	for b.Loop() {
		floor := pipeFloor(b, 2000)
		var budget []float64
		var cpu100 time.Duration
		for range 5 {
			m, _, cpu := roundTrip(b, true, 100, "")
			budget = append(budget, m)
			cpu100 = cpu
		}
		sort.Float64s(budget)
		wake := budget[len(budget)/2]
		b.ReportMetric(wake, "wake-100calls-median-us")
		wMed, wP99, cpu1000 := roundTrip(b, true, 1000, "")
		dMed, _, _ := roundTrip(b, true, 300, b.TempDir())
		pMed, pP99, _ := roundTrip(b, false, 40, "")
		b.ReportMetric(wMed, "wake-median-us")
		b.ReportMetric(wP99, "wake-p99-us")
		b.ReportMetric(dMed, "wake-disk-median-us")
		b.ReportMetric(pMed, "poll-median-us")
		b.ReportMetric(pP99, "poll-p99-us")
		b.ReportMetric(pMed/wMed, "poll/wake-ratio")
		b.ReportMetric(floor, "floor-us")
		b.ReportMetric(wake/floor, "roundtrip/floor-ratio")
		b.ReportMetric(float64((cpu1000-cpu100).Microseconds())/900, "host-cpu-us/call")
	}
}

// batchScript times, ROUNDS times, WIDTH calls of each kind made one after
// the other and the same calls in one batch(), and prints the four medians
// in microseconds: sequential reads, batched reads, sequential greps,
// batched greps. Each grep searches the whole tree for its own word.
const batchScript = `
import time
def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] / 1000
reads = [("read", {"path": "small.txt"})] * WIDTH
greps = [("grep", {"pattern": "word%d" % i}) for i in range(WIDTH)]
out = []
for calls in (reads, greps):
    seq, par = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter_ns()
        for tool, params in calls:
            (read if tool == "read" else grep)(**params)
        t1 = time.perf_counter_ns()
        batch(calls)
        t2 = time.perf_counter_ns()
        seq.append(t1 - t0)
        par.append(t2 - t1)
    out += [median(seq), median(par)]
text(" ".join("%.0f" % x for x in out))
`

// grepTree writes a small source tree: 60 files of 80 lines in 6
// directories, each line naming one of 20 words, so every grep reads the
// whole tree and finds a few lines.
func grepTree(b *testing.B, root string) {
	for d := range 6 {
		dir := filepath.Join(root, "src", fmt.Sprintf("pkg%d", d))
		require.NoError(b, os.MkdirAll(dir, 0o755))
		for f := range 10 {
			var body strings.Builder
			for l := range 80 {
				fmt.Fprintf(&body, "func f%d_%d() { return call(word%d, %d) } // line %d of file %d\n", f, l, (d*800+f*80+l)%97, l, l, f)
			}
			require.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", f)), []byte(body.String()), 0o644))
		}
	}
}

// BenchmarkBatchVersusSequential is batch() against the same calls made one
// after the other, at max_parallel_rpc = 4: 20 reads of a small file, and
// 20 greps over a small tree. A ratio above 1 is batch() winning.
func BenchmarkBatchVersusSequential(b *testing.B) {
	root := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(root, "small.txt"), []byte("hello\nworld\n"), 0o644))
	grepTree(b, root)
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.MaxParallelRPC = 4
	cfg.MaxRPCCalls = 10000
	cfg.MaxRPCResultBytes = 1 << 30
	rt, err := executecode.New(cfg, executecode.WithRoot(root))
	require.NoError(b, err)
	defer rt.Close(context.Background())
	script := strings.NewReplacer("ROUNDS", "15", "WIDTH", "20").Replace(batchScript)
	for b.Loop() {
		res, err := rt.Execute(context.Background(), executecode.Call{Script: script, TimeoutMS: 120000})
		require.NoError(b, err)
		require.Len(b, res.Blocks, 1, res.Text())
		var seqRead, batchRead, seqGrep, batchGrep float64
		_, err = fmt.Sscan(res.Blocks[0], &seqRead, &batchRead, &seqGrep, &batchGrep)
		require.NoError(b, err, res.Blocks[0])
		b.ReportMetric(seqRead, "read-sequential-us")
		b.ReportMetric(batchRead, "read-batch-us")
		b.ReportMetric(seqRead/batchRead, "read-sequential/batch-ratio")
		b.ReportMetric(seqGrep, "grep-sequential-us")
		b.ReportMetric(batchGrep, "grep-batch-us")
		b.ReportMetric(seqGrep/batchGrep, "grep-sequential/batch-ratio")
	}
}

// BenchmarkRunVersusBarePython compares the whole `execute-code run` of a
// one-line script with `python3 -c pass` on the same interpreter.
func BenchmarkRunVersusBarePython(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "execute-code")
	build := exec.Command("go", "build", "-o", bin, "./cmd/execute-code")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as `make build`
	out, err := build.CombinedOutput()
	require.NoError(b, err, string(out))
	python, err := proc.ResolvePython("")
	require.NoError(b, err)
	root := b.TempDir()
	script := filepath.Join(root, "one.py")
	require.NoError(b, os.WriteFile(script, []byte("text('hi')\n"), 0o644))

	const runs = 30
	measure := func(name string, args ...string) float64 {
		var ds []time.Duration
		for i := 0; i < runs+3; i++ {
			cmd := exec.Command(name, args...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "LEMON_EXECUTE_CODE_PYTHON_PATH="+python, "TMPDIR="+root)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			require.NoError(b, err, string(out))
			if i >= 3 {
				ds = append(ds, time.Since(start))
			}
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	for b.Loop() {
		bare := measure(python, "-c", "pass")
		run := measure(bin, "run", "--root", root, script)
		b.ReportMetric(bare, "python-c-pass-ms")
		b.ReportMetric(run, "execute-code-run-ms")
		b.ReportMetric(run/bare, "run/python-ratio")
	}
}

// BenchmarkSessionCell measures a whole session call of `x = 1` through
// the facade on a warm kernel (bridge, RPC server, registry lease, cell),
// and a new kernel's first result, side by side.
func BenchmarkSessionCell(b *testing.B) {
	root := b.TempDir()
	cfg := config.Defaults()
	cfg.Enabled, cfg.KernelMode = true, config.Session
	rt, err := executecode.New(cfg, executecode.WithRoot(root))
	require.NoError(b, err)
	defer rt.Close(context.Background())
	for b.Loop() {
		owner, err := rt.Attach(context.Background(), executecode.Scope{SessionID: "bench", AgentID: "main"})
		require.NoError(b, err)
		start := time.Now()
		_, err = rt.Execute(context.Background(), executecode.Call{Script: "x = 1", Owner: owner})
		require.NoError(b, err)
		first := time.Since(start)
		var ds []time.Duration
		for range 300 {
			start := time.Now()
			res, err := rt.Execute(context.Background(), executecode.Call{Script: "x = 1", Owner: owner})
			require.NoError(b, err)
			require.True(b, res.Details.KernelReused != nil && *res.Details.KernelReused)
			ds = append(ds, time.Since(start))
		}
		require.NoError(b, owner.Detach(context.Background()))
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "warm-cell-median-us")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "warm-cell-p99-us")
		b.ReportMetric(float64(first.Microseconds())/1000, "new-kernel-first-result-ms")
	}
}
