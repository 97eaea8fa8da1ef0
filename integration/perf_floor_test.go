package integration

// The suite every performance goal is judged by (`make bench`). Each
// benchmark measures, in the same run as what it judges, a floor that
// the machine's load weighs on alike, and reports its figure as a ratio
// to that floor (a "...-ratio" unit): a pipe ping-pong between Go and
// python for a round trip, python's own start for a start-up. make bench
// runs each five times (-count 5): the median of the five and their
// range are the figure.

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/internal/proctest"
)

// pingPong echoes stdin to stdout one byte at a time, unbuffered: the
// least a round trip between the host and a python process can cost.
const pingPong = `import os
while True:
    b = os.read(0, 1)
    if not b:
        break
    os.write(1, b)
`

// floor is one measurement of the pipe ping-pong floor.
type floor struct {
	// rttUS is the median round trip of one byte each way, in µs.
	rttUS float64
	// hostCPUUS is the host's CPU (user + system) per round trip, in µs.
	hostCPUUS float64
}

// floorTrips is how many round trips one floor measurement times, after
// floorWarmup untimed ones.
const (
	floorTrips  = 2000
	floorWarmup = 200
)

// measureFloor times the ping-pong on python: the same interpreter the
// runtime under test runs, in the same run.
func measureFloor(b *testing.B, python string) floor {
	b.Helper()
	f := startPipeFloor(b, python)
	defer f.close(b)
	for range floorWarmup {
		f.roundTrip(b)
	}
	ds := make([]time.Duration, floorTrips)
	cpu0 := hostCPU()
	for i := range ds {
		ds[i] = f.roundTrip(b)
	}
	cpu := hostCPU() - cpu0
	return floor{rttUS: us(median(ds)), hostCPUUS: us(cpu) / floorTrips}
}

// pipeFloor is a python3 that answers one byte with one byte over two
// pipes (pingPong): what a helper call's bells and a cell's channels
// carry at the least.
type pipeFloor struct {
	cmd     *exec.Cmd
	in, out *os.File
	buf     [1]byte
	closed  bool
}

func startPipeFloor(b *testing.B, python string) *pipeFloor {
	b.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(b, err)
	outR, outW, err := os.Pipe()
	require.NoError(b, err)
	cmd := exec.Command(python, "-I", "-S", "-c", pingPong)
	cmd.Stdin, cmd.Stdout = inR, outW
	require.NoError(b, cmd.Start())
	_ = inR.Close()
	_ = outW.Close()
	f := &pipeFloor{cmd: cmd, in: inW, out: outR}
	b.Cleanup(func() { f.close(b) })
	return f
}

// roundTrip is one byte to python and its echo back.
func (f *pipeFloor) roundTrip(b *testing.B) time.Duration {
	start := time.Now()
	_, err := f.in.Write([]byte{'x'})
	require.NoError(b, err)
	_, err = io.ReadFull(f.out, f.buf[:])
	require.NoError(b, err)
	return time.Since(start)
}

// close ends python at the end of its input and reaps it.
func (f *pipeFloor) close(b *testing.B) {
	if f.closed {
		return
	}
	f.closed = true
	_ = f.in.Close()
	err := f.cmd.Wait()
	_ = f.out.Close()
	require.NoError(b, err)
}

// reportFloor reports the floor under its own units.
func reportFloor(b *testing.B, f floor) {
	b.ReportMetric(f.rttUS, "floor-rtt-us")
}

// startFloorRuns is how many `python3 -c pass` one start floor times.
const startFloorRuns = 10

// measureStartFloor is the median wall time of `python -c pass` from
// the host's fork to its reap, in ms: what any fresh interpreter costs.
func measureStartFloor(b *testing.B, python string) float64 {
	b.Helper()
	ds := make([]time.Duration, startFloorRuns)
	for i := range ds {
		ds[i] = timePythonPass(b, python)
	}
	return ms(median(ds))
}

func timePythonPass(b *testing.B, python string) time.Duration {
	b.Helper()
	t0 := time.Now()
	out, err := exec.Command(python, "-c", "pass").CombinedOutput()
	d := time.Since(t0)
	require.NoError(b, err, string(out))
	return d
}

// hostCPU is the user and system time this process has used so far.
func hostCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 50) }

// percentile sorts ds and returns its p-th percentile (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	return ds[min(max(i-1, 0), len(ds)-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perfPython is the interpreter the runtime picks by default, which every
// runtime of the suite runs and every floor is measured on.
func perfPython(b *testing.B) string {
	b.Helper()
	p, err := proc.ResolvePython("")
	require.NoError(b, err)
	return p
}

// perfEnv is one benchmark's runtime and what it owns, closed with the
// same leak checks the integration tests end with: no process carrying
// its mark, nothing left in its staging directory.
type perfEnv struct {
	b    *testing.B
	rt   *executecode.Runtime
	root string
	tmp  string
}

// perfTmpDir makes a private staging directory where the runtime puts it
// by default, on a tmpfs when there is one (staging.go), so that what is
// measured is what a host gets; it must be empty when the benchmark ends.
func perfTmpDir(b *testing.B) string {
	b.Helper()
	parent := ""
	if fi, err := os.Stat(sharedMemory); err == nil && fi.IsDir() && writable(sharedMemory) {
		parent = sharedMemory
	}
	dir, err := os.MkdirTemp(parent, "execute-code-bench-")
	require.NoError(b, err)
	b.Cleanup(func() {
		left, _ := os.ReadDir(dir)
		for _, e := range left {
			b.Errorf("left in the staging directory: %s", e.Name())
		}
		require.NoError(b, os.RemoveAll(dir))
	})
	return dir
}

const sharedMemory = "/dev/shm"

func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	f.Close()
	return os.Remove(f.Name()) == nil
}

// markedBenchmark is the benchmark whose mark is set: one mark serves
// all its runtimes.
var markedBenchmark *testing.B

// markPerfProcesses tags every process the benchmark starts and checks at
// its end, once all its runtimes are closed, that none is left. A
// benchmark with two runtimes gets one mark: a runtime's warm
// interpreters are forked with the environment of the moment, so a
// second mark would tag the first runtime's replacements, and the second
// runtime's check would find them alive until the first closes.
func markPerfProcesses(b *testing.B) {
	b.Helper()
	if markedBenchmark == b {
		return
	}
	markedBenchmark = b
	mark := randomMark()
	b.Setenv(markEnv, mark)
	b.Cleanup(func() {
		markedBenchmark = nil
		deadline := time.Now().Add(5 * time.Second)
		for {
			left := proctest.Marked(markEnv, mark)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				b.Errorf("processes left behind: %v", left)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// newPerfEnv builds an enabled runtime over a fresh root holding files;
// edit adjusts the configuration.
func newPerfEnv(b *testing.B, files map[string]string, edit func(*config.Config)) *perfEnv {
	b.Helper()
	markPerfProcesses(b)
	e := &perfEnv{b: b, root: b.TempDir(), tmp: perfTmpDir(b)}
	writeTree(b, e.root, files)
	cfg, _ := perfConfig(b, -1, edit)
	e.rt = newPerfRuntime(b, cfg, e.root, e.tmp)
	return e
}

// newPerfRuntime opens a runtime the benchmark's cleanup closes (before
// the leak checks registered earlier run).
func newPerfRuntime(b *testing.B, cfg config.Config, root, tmp string) *executecode.Runtime {
	b.Helper()
	rt, err := executecode.New(cfg, executecode.WithRoot(root), executecode.WithTmpDir(tmp))
	require.NoError(b, err)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(b, rt.Close(ctx))
	})
	return rt
}

func writeTree(b *testing.B, root string, files map[string]string) {
	b.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(b, os.WriteFile(p, []byte(body), 0o644))
	}
}

// perfConfig is an enabled configuration with warm_interpreters = warm
// (warm < 0: the default), then edit; ok is false when the configuration
// knows no such key, and the configuration then is what exists: the warm
// pool is switched on by that key where it exists.
func perfConfig(b *testing.B, warm int, edit func(*config.Config)) (cfg config.Config, ok bool) {
	b.Helper()
	cfg, ok = config.Defaults(), true
	if warm >= 0 {
		loaded, err := config.Load(config.Options{Env: []string{}, Overrides: map[string]any{"warm_interpreters": warm}})
		switch {
		case errors.Is(err, config.ErrOverride) && strings.Contains(err.Error(), "unknown key"):
			ok = false
		case err != nil:
			require.NoError(b, err)
		default:
			cfg = loaded
		}
	}
	cfg.Enabled = true
	if edit != nil {
		edit(&cfg)
	}
	return cfg, ok
}

// pythonPath is what the first python3 on PATH runs (a version manager's
// shim resolved to its interpreter), which may differ from perfPython.
func pythonPath(b *testing.B) string {
	b.Helper()
	p, err := exec.LookPath("python3")
	require.NoError(b, err)
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	require.NoError(b, err)
	return strings.TrimSpace(string(out))
}

// buildCLI builds the command as `make build` does, into the benchmark's
// temporary directory.
func buildCLI(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "execute-code")
	build := exec.Command("go", "build", "-o", bin, "./cmd/execute-code")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(b, err, string(out))
	return bin
}
