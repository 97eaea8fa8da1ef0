package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/telemetry"

	"github.com/executecode/executecode/internal/proctest"
)

// Soak parameters. SOAK_CYCLES sets the number of cycles (`make soak`
// runs 1,000); the default keeps `make test` near a minute.
const (
	defaultSoakCycles = 100
	soakWorkers       = 4
	soakMaxKernels    = 6
	// evictSessions is how many kernels an eviction cycle starts, one after
	// the other: more than the cap, so admission has to evict.
	evictSessions = soakMaxKernels + 1
)

func soakCycles(t *testing.T) int {
	s := os.Getenv("SOAK_CYCLES")
	if s == "" {
		return defaultSoakCycles
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "SOAK_CYCLES")
	require.Positive(t, n, "SOAK_CYCLES")
	return n
}

// findControlFD is python that finds the runner's private control
// descriptor through /proc/self/fd: the one write-only pipe above the
// doorbells (fds 3 and 4) and the capture pipes' read ends.
const findControlFD = `
import fcntl, os, stat
def control_fd():
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 5:
            continue
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                found.append(fd)
        except OSError:
            pass
    assert len(found) == 1, found
    return found[0]
`

// soakFault is one kind of cycle: what it does to its kernel and what the
// results must say.
type soakFault struct {
	name string
	run  func(s *soak, o *executecode.Owner, i int)
}

// soak drives one runtime through many kernel lifecycles from several
// goroutines.
type soak struct {
	t     *testing.T
	e     *env
	calls atomic.Int64
	// outcomes counts results by fault and outcome, for the report.
	mu       sync.Mutex
	outcomes map[string]int
	events   map[string]int
}

func (s *soak) count(key string) {
	s.mu.Lock()
	s.outcomes[key]++
	s.mu.Unlock()
}

func (s *soak) cell(o *executecode.Owner, script string, reset bool, timeoutMS int) executecode.Result {
	s.calls.Add(1)
	res, err := s.e.rt.Execute(context.Background(), executecode.Call{Script: script, Owner: o, Reset: reset, TimeoutMS: timeoutMS})
	if !assert.NoError(s.t, err) || !assert.NotNil(s.t, res.Details, res.Text()) {
		return executecode.Result{Details: &executecode.Details{}}
	}
	return res
}

// set stores the cycle's marker in the kernel; alive reports whether the
// kernel still holds it (a fresh kernel does not).
func (s *soak) set(o *executecode.Owner, i int) executecode.Result {
	res := s.cell(o, fmt.Sprintf("marker = %d", i), false, 10000)
	assert.Empty(s.t, res.Details.Reason, res.Text())
	return res
}

func (s *soak) holds(o *executecode.Owner, i int) (held bool, res executecode.Result) {
	res = s.cell(o, "text(str(globals().get('marker')))", false, 10000)
	if !assert.Len(s.t, res.Blocks, 1, res.Text()) {
		return false, res
	}
	return res.Blocks[0] == strconv.Itoa(i), res
}

// lost asserts that the cycle's kernel state is gone: the next cell runs
// on a fresh kernel (or isolated, when every slot was busy).
func (s *soak) lost(fault string, o *executecode.Owner, i int) {
	held, res := s.holds(o, i)
	assert.False(s.t, held, "%s: state survived a discard", fault)
	assert.False(s.t, boolp(res.Details.KernelReused), "%s: %s", fault, res.Text())
}

// kept checks the state survived, unless another cycle's admission
// evicted the idle kernel in between (then it runs on a fresh one).
func (s *soak) kept(fault string, o *executecode.Owner, i int) {
	held, res := s.holds(o, i)
	if boolp(res.Details.KernelReused) {
		assert.True(s.t, held, "%s: state lost on a reused kernel", fault)
	} else {
		s.count("evicted meanwhile")
	}
}

var soakFaults = []soakFault{
	{"clean", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		s.kept("clean", o, i)
	}},
	{"exception", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		res := s.cell(o, "raise ValueError('soak')", false, 10000)
		assert.Equal(s.t, executecode.ReasonException, res.Details.Reason, res.Text())
		s.kept("exception", o, i)
	}},
	{"timeout", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		res := s.cell(o, "import time\ntime.sleep(30)", false, 1000)
		assert.Equal(s.t, executecode.KilledByTimeout, res.Details.KilledBy, res.Text())
		s.lost("timeout", o, i)
	}},
	{"os._exit", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		res := s.cell(o, "import os\nos._exit(3)", false, 10000)
		assert.False(s.t, boolp(res.Details.StateRetained), res.Text())
		assert.NotEmpty(s.t, res.Details.Reason, res.Text())
		s.lost("os._exit", o, i)
	}},
	{"kill -9", func(s *soak, o *executecode.Owner, i int) {
		res := s.cell(o, fmt.Sprintf("import os\nmarker = %d\ntext(str(os.getpid()))", i), false, 10000)
		if !assert.Len(s.t, res.Blocks, 1, res.Text()) || !res.Details.Persistent {
			return
		}
		pid, err := strconv.Atoi(res.Blocks[0])
		if assert.NoError(s.t, err) {
			assert.NoError(s.t, syscall.Kill(pid, syscall.SIGKILL))
			proctest.WaitGone([]int{pid}, 5*time.Second)
		}
		// The next cell may reach the worker before it has seen its
		// interpreter die, or while it tears the kernel down: it fails
		// without running, and the one after it runs on a fresh kernel.
		res = s.cell(o, "text(str(globals().get('marker')))", false, 10000)
		if boolp(res.Details.KernelReused) {
			// port_exit (killed_by signal) or shutting_down.
			assert.Contains(s.t, []executecode.Reason{executecode.ReasonPortExit, executecode.ReasonShuttingDown}, res.Details.Reason, res.Text())
			assert.Empty(s.t, res.Blocks, "the cell never ran")
			s.count("kill -9 raced the next cell")
			s.lost("kill -9", o, i)
			return
		}
		assert.Equal(s.t, []string{"None"}, res.Blocks, res.Text())
	}},
	{"oversized frame", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		res := s.cell(o, findControlFD+`os.write(control_fd(), b"\x1elemon-python\t" + b"a" * 300000 + b"\n")
import time
time.sleep(30)
`, false, 10000)
		assert.Equal(s.t, executecode.KilledByProtocolFault, res.Details.KilledBy, res.Text())
		s.lost("oversized frame", o, i)
	}},
	{"owner death", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		started := filepath.Join(s.e.root, fmt.Sprintf("started-%d", i))
		running := make(chan executecode.Result, 1)
		go func() {
			running <- s.cell(o, fmt.Sprintf("import time\nopen(%q, 'w').close()\ntime.sleep(30)", started), false, 20000)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		queued := make(chan executecode.Result, 1)
		go func() {
			// Sent after the Detach (a slow scheduler), it is ErrDetached.
			res, err := s.e.rt.Execute(context.Background(), executecode.Call{Script: "text('queued ran')", Owner: o, TimeoutMS: 20000})
			if errors.Is(err, executecode.ErrDetached) {
				res.Details.FallbackReason = "detached"
			} else {
				assert.NoError(s.t, err)
			}
			queued <- res
		}()
		time.Sleep(20 * time.Millisecond)
		assert.NoError(s.t, o.Detach(context.Background()))
		res := <-running
		assert.Equal(s.t, executecode.KilledByOwnerGone, res.Details.KilledBy, res.Text())
		// Queued behind the running cell, it leaves the queue unrun; sent
		// after the Detach, it does not run at all.
		q := <-queued
		assert.Empty(s.t, q.Blocks, "a queued cell of a dead owner never runs")
		_ = os.Remove(started)
	}},
	{"reset", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		res := s.cell(o, "text(str(globals().get('marker')))", true, 10000)
		assert.True(s.t, res.Details.ResetPerformed || !boolp(res.Details.KernelReused), res.Text())
		assert.Equal(s.t, []string{"None"}, res.Blocks)
	}},
	{"eviction", func(s *soak, o *executecode.Owner, i int) {
		s.set(o, i)
		var extra []*executecode.Owner
		for k := range evictSessions {
			x, err := s.e.rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprintf("soak-%d-evict-%d", i, k), AgentID: "main"})
			if !assert.NoError(s.t, err) {
				return
			}
			extra = append(extra, x)
			s.cell(x, "y = 1", false, 10000)
		}
		// Seven more kernels against a cap of six: this cycle's first
		// kernel, the least recently used idle one of its own, is gone
		// unless another cycle's idle kernel went first.
		s.kept("eviction", o, i)
		for _, x := range extra {
			assert.NoError(s.t, x.Detach(context.Background()))
		}
	}},
}

// TestSoakKernelLifecyclesWithInjectedFaults drives SOAK_CYCLES cycles,
// soakWorkers at a time, each attaching a session and injecting one fault
// (timeouts, os._exit, kill -9 of the kernel, an oversized frame on the
// runner's control fd, owner death with a queued cell, reset, evictions,
// exceptions). Then nothing may be left: no process, no file in the
// staging root, no extra goroutine, and host RSS may not have grown by 10 %
// after the warm-up.
func TestSoakKernelLifecyclesWithInjectedFaults(t *testing.T) {
	cycles := soakCycles(t)
	ignore := goleak.IgnoreCurrent()
	var tmp string
	t.Cleanup(func() {
		// Runs after the runtime's Close (cleanups run last-in first-out).
		left, _ := filepath.Glob(filepath.Join(tmp, "execute-code-private-*"))
		assert.Empty(t, left, "the staging root is removed on Close")
		assert.NoError(t, goleak.Find(ignore), "goroutines left after Close")
	})

	s := &soak{t: t, outcomes: map[string]int{}, events: map[string]int{}}
	bus := &telemetry.Bus{}
	bus.Subscribe(telemetry.HandlerFunc(func(ev telemetry.Event) {
		name := ev.Name()
		switch ev := ev.(type) {
		case telemetry.SessionStop:
			name += ":" + string(ev.Reason)
		case telemetry.SessionCrash:
			name += ":" + string(ev.Reason)
		case telemetry.Fallback:
			name += ":" + string(ev.Reason)
		}
		s.mu.Lock()
		s.events[strings.TrimPrefix(name, "coding_agent.python_repl.")]++
		s.mu.Unlock()
	}))
	s.e = sessionEnv(t, nil, withConfig(func(c *config.Config) { c.MaxLiveKernels = soakMaxKernels }),
		withRuntimeOption(executecode.WithTelemetry(bus)))
	tmp = s.e.tmp

	warmup := max(cycles/10, 2*len(soakFaults))
	var next atomic.Int64
	var baseline, end memFigures
	var baseOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range soakWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= cycles || t.Failed() {
					return
				}
				if i == warmup {
					baseOnce.Do(func() { baseline = settledMemory() })
				}
				f := soakFaults[i%len(soakFaults)]
				o, err := s.e.rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprintf("soak-%d", i), AgentID: "main"})
				if !assert.NoError(t, err) {
					return
				}
				f.run(s, o, i)
				assert.NoError(t, o.Detach(context.Background()))
				s.count(f.name)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.False(t, t.Failed(), "a cycle failed; leak figures would mean nothing")

	// Kernels being stopped count as unreachable until their worker is
	// gone, workspace released.
	snap := waitSnapshot(t, s.e, func(sn executecode.Snapshot) bool {
		return sn.Capacity.Live == 0 && sn.Phases["unreachable"] == 0 && sn.InflightCells == 0 && sn.Owners == 0
	})
	assert.Empty(t, proctest.WaitGone(scriptProcesses(s.e.mark), 5*time.Second), "no process left but the runtime's guard")
	files := stagingFiles(t, s.e.stagingRoot())
	assert.Empty(t, files, "no file left in the staging root")
	end = settledMemory()
	if baseline.rss == 0 {
		baseline = end
	}
	// Work still winding down (a worker's last messages, a timer's
	// goroutine) holds memory for a moment after the last cell; a leak
	// holds it for good. The end figure is the lowest of a few settled
	// samples over two seconds, so only what stays is counted.
	for i := 0; i < 10; i++ {
		time.Sleep(200 * time.Millisecond)
		m := settledMemory()
		end.heap = min(end.heap, m.heap)
		end.rss = min(end.rss, m.rss)
	}
	growth := float64(end.rss-baseline.rss) / float64(baseline.rss) * 100

	s.mu.Lock()
	t.Logf("soak: %d cycles, %d cells in %s with %d workers (cap %d kernels)", cycles, s.calls.Load(), elapsed.Round(time.Millisecond), soakWorkers, soakMaxKernels)
	t.Logf("soak: kernel lifecycles %d; events %s", s.events["session.start"], sortedCounts(s.events))
	t.Logf("soak: cycles %s", sortedCounts(s.outcomes))
	s.mu.Unlock()
	t.Logf("soak: left over: %d processes, %d staging files, snapshot live %d owners %d",
		len(scriptProcesses(s.e.mark)), len(files), snap.Capacity.Live, snap.Owners)
	t.Logf("soak: host RSS %d KiB after %d warm-up cycles, %d KiB at the end (%+.1f %%); live heap %d KiB -> %d KiB; %d goroutines",
		baseline.rss>>10, warmup, end.rss>>10, growth, baseline.heap>>10, end.heap>>10, runtime.NumGoroutine())
	if raceDetector {
		heapGrowth := float64(end.heap-baseline.heap) / float64(baseline.heap) * 100
		assert.Less(t, heapGrowth, 10.0, "live heap growth after the warm-up (RSS is not a leak signal under -race)")
		return
	}
	assert.Less(t, growth, 10.0, "host RSS growth after the warm-up")
}

// memFigures are this process's resident set, live heap (HeapAlloc) and
// live heap objects after a collection has returned what it can to the
// system; sizes in bytes.
type memFigures struct{ rss, heap, objects int64 }

func settledMemory() memFigures {
	// Two collections: objects a finalizer released in the first are
	// garbage only for the second.
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memFigures{heap: int64(ms.HeapAlloc), objects: int64(ms.HeapObjects)}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			m.rss = kib << 10
		}
	}
	return m
}

// stagingFiles lists everything under root but its owner marker.
func stagingFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root || d.Name() == ".execute-code-owner" {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	}))
	return out
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
