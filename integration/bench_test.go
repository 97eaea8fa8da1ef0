package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
)

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
	res, err := rt.Execute(context.Background(), executecode.Call{Script: strings.ReplaceAll(perfRoundTripScript, "CALLS", strconv.Itoa(calls)), TimeoutMS: 120000})
	cpu = hostCPU() - cpu0
	require.NoError(b, err)
	require.Len(b, res.Blocks, 1, res.Text())
	f := strings.Fields(res.Blocks[0])
	median, _ = strconv.ParseFloat(f[0], 64)
	p99, _ = strconv.ParseFloat(f[1], 64)
	return median / 1000, p99 / 1000, cpu // the script reports ns
}

// BenchmarkHelperRoundTrip measures one helper call's round trip with the
// doorbells and with the reference's polling (host 25 ms, shim 20 ms),
// side by side in one run, on the default staging (workspaces on a tmpfs
// when TMPDIR is unset) and with workspaces on the disk's temp directory,
// against the floor measured in the same run: a byte to python and back
// through pipes (measureFloor, the suite's floor). Fewer calls are made poll-only: each costs
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
		floor := measureFloor(b, perfPython(b)).rttUS
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
