package pump

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/internal/shimtest"
	"github.com/executecode/executecode/tools"
)

// pingPong is the python side of the floor: it times N round trips of
// one byte, out on fd 3 and back on fd 4, as a helper call rings the
// request bell and waits on the response bell, and prints the median in
// nanoseconds.
const pingPong = `
import os, time
samples = []
for _ in range(N):
    if PAUSE:
        time.sleep(PAUSE)
    t0 = time.perf_counter_ns()
    os.write(3, b"\x01")
    os.read(4, 1)
    samples.append(time.perf_counter_ns() - t0)
samples.sort()
print(samples[len(samples) // 2])
`

// pipeFloor is the physical floor of a helper call: one byte from python
// to the host and one back, the host reading through its poller as it
// reads the request bell and answering at once. It returns python's
// median of n round trips.
func pipeFloor(b *testing.B, python string, n int, pause string) time.Duration {
	b.Helper()
	toR, toW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(python, "-I", "-S", "-c", strings.NewReplacer("PAUSE", pause, "N", fmt.Sprint(n)).Replace(pingPong))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{toW, fromR}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
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
	if err != nil {
		b.Fatalf("python: %v\n%s", err, out.String())
	}
	var ns float64
	if _, err := fmt.Sscan(out.String(), &ns); err != nil {
		b.Fatal(out.String())
	}
	return time.Duration(ns)
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// shimCalls is a script timing its own helper calls: it prints the median
// of one call in nanoseconds.
const shimCalls = `
import time
samples = []
for i in range(CALLS):
    t0 = time.perf_counter_ns()
    read("x")
    samples.append(time.perf_counter_ns() - t0)
samples.sort()
print(samples[len(samples) // 2])
`

// shimBatch times one batch() of WIDTH reads against WIDTH sequential
// reads, ROUNDS times, and prints both medians in nanoseconds.
const shimBatch = `
import time
seq, par = [], []
for _ in range(ROUNDS):
    t0 = time.perf_counter_ns()
    for i in range(WIDTH):
        read("x")
    t1 = time.perf_counter_ns()
    batch([("read", {"path": "x"})] * WIDTH)
    t2 = time.perf_counter_ns()
    seq.append(t1 - t0)
    par.append(t2 - t1)
seq.sort()
par.sort()
print(seq[len(seq) // 2], par[len(par) // 2])
`

// shimRun runs script against a per-call run's server with the rendered
// shim and real bells, and returns its output and the host's CPU time
// (user and system) spent meanwhile.
func shimRun(b testing.TB, python, script string, cfg Config) (string, time.Duration) {
	b.Helper()
	staged := shimtest.Stage(b, benchDir(b), cfg.Token, script, []string{"read"})
	cfg.Dir, cfg.Bells = staged.Dir, staged.Bells
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cpu0 := hostCPU()
	cmd := staged.Start(ctx, b, python, &out, &out)
	exited := make(chan struct{})
	run := StartRun(ctx, cfg, exited)
	err := cmd.Wait()
	close(exited)
	run.Wait()
	cpu := hostCPU() - cpu0
	if err != nil {
		b.Fatalf("python: %v\n%s", err, out.String())
	}
	return strings.TrimSpace(out.String()), cpu
}

// benchDir is a private directory where the runtime would stage a run:
// on /dev/shm when TMPDIR is unset and it is a directory, else in TMPDIR.
func benchDir(b testing.TB) string {
	if os.Getenv("TMPDIR") != "" {
		return b.TempDir()
	}
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "pump-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func hostCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func shimConfig(b testing.TB, parallel int) Config {
	token, err := NewToken()
	if err != nil {
		b.Fatal(err)
	}
	return Config{
		Token: token, Tools: map[string]tools.Tool{"read": echoTool("read")},
		MaxCalls: 1 << 30, MaxResultBytes: 1 << 62, MaxParallel: parallel,
	}
}

// BenchmarkShimRoundTrip is one helper call of the rendered shim through a
// per-call run's server and the doorbells, against the physical floor
// measured in the same run: a byte to python and back. host-cpu-us/call
// is the host's CPU time per call, from two runs of different lengths.
func BenchmarkShimRoundTrip(b *testing.B) {
	python := proctest.Python(b)
	cfg := shimConfig(b, 0)
	const calls = 2000
	for b.Loop() {
		floor := pipeFloor(b, python, 2000, "0")
		idle := pipeFloor(b, python, 300, "0.001")
		b.ReportMetric(float64(idle.Nanoseconds())/1000, "idle-floor-us")
		out, cpuLong := shimRun(b, python, strings.ReplaceAll(shimCalls, "CALLS", fmt.Sprint(calls)), cfg)
		_, cpuShort := shimRun(b, python, strings.ReplaceAll(shimCalls, "CALLS", fmt.Sprint(calls/4)), cfg)
		var med float64
		if _, err := fmt.Sscan(out, &med); err != nil {
			b.Fatal(out)
		}
		b.ReportMetric(float64(floor.Nanoseconds())/1000, "floor-us")
		b.ReportMetric(med/1000, "roundtrip-us")
		b.ReportMetric(med/float64(floor.Nanoseconds()), "roundtrip/floor-ratio")
		b.ReportMetric(float64((cpuLong-cpuShort).Nanoseconds())/1000/float64(calls-calls/4), "host-cpu-us/call")
	}
}

// BenchmarkShimBatch is batch() of 20 reads against 20 sequential reads.
func BenchmarkShimBatch(b *testing.B) {
	python := proctest.Python(b)
	cfg := shimConfig(b, 4)
	script := strings.NewReplacer("ROUNDS", "30", "WIDTH", "20").Replace(shimBatch)
	for b.Loop() {
		out, _ := shimRun(b, python, script, cfg)
		var seq, par float64
		if _, err := fmt.Sscan(out, &seq, &par); err != nil {
			b.Fatal(out)
		}
		b.ReportMetric(seq/1000, "sequential-us")
		b.ReportMetric(par/1000, "batch-us")
		b.ReportMetric(seq/par, "sequential/batch-ratio")
	}
}
