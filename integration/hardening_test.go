package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"

	"github.com/executecode/executecode/internal/proctest"
)

// escalation is the bound on how long a kill may take once its
// deadline is reached: SIGINT, SIGTERM and SIGKILL one second apart.
const escalation = 3 * time.Second

// stubborn is a python program that records every SIGINT and SIGTERM it
// gets in the file named by argv[1], ignores them, and lives on. It
// writes "ready <pid>" first.
const stubborn = `
import os, signal, sys, time
log = sys.argv[1]
def note(line):
    with open(log, "a") as f:
        f.write(line + "\n")
def got(sig, frame):
    note(signal.Signals(sig).name)
signal.signal(signal.SIGINT, got)
signal.signal(signal.SIGTERM, got)
note("ready %d" % os.getpid())
while True:
    time.sleep(0.05)
`

// spawnStubborn is a script fragment that starts stubborn as a grandchild
// logging to LOG (in the script's cwd, the tool root) and waits until it
// runs, so its handlers are in place before anything signals it.
func spawnStubborn(log string) string {
	return fmt.Sprintf(`
import os, subprocess, sys, time
_gc = subprocess.Popen([sys.executable, "-c", %q, %q])
while not (os.path.exists(%q) and open(%q).read().startswith("ready")):
    time.sleep(0.01)
`, stubborn, log, log, log)
}

// ignoreSignals makes the script itself ignore SIGINT and SIGTERM.
const ignoreSignals = `
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
`

// readyPID waits for stubborn's log in dir and returns its pid.
func readyPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			if line, _, _ := strings.Cut(string(b), "\n"); strings.HasPrefix(line, "ready ") {
				pid, err := strconv.Atoi(strings.TrimPrefix(line, "ready "))
				require.NoError(t, err)
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no grandchild started (%s)", path)
	return 0
}

// pidFile waits until the script wrote a pid to path.
func pidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid written to %s", path)
	return 0
}

// writePID is a script fragment writing the interpreter's pid to name.
func writePID(name string) string {
	return fmt.Sprintf("import os\nwith open(%q + '.tmp', 'w') as _f:\n    _f.write('%%d\\n' %% os.getpid())\nos.replace(%q + '.tmp', %q)\n", name, name, name)
}

// killMarked SIGKILLs every process of mark still alive: descendants
// that escaped their group with setsid are outside the runtime's reach
// by design (docs/architecture.md, Rules: no survivors) and must not
// outlive the test.
func killMarked(mark string) {
	for _, pid := range proctest.Marked(markEnv, mark) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// asyncCell runs a cell in the background; the result arrives on the
// returned channel.
func (e *env) asyncCell(ctx context.Context, o *executecode.Owner, script string, timeoutMS int) <-chan executecode.Result {
	ch := make(chan executecode.Result, 1)
	go func() {
		res, err := e.cellErr(ctx, o, script, false, timeoutMS)
		if err != nil && !stoppedByCtx(err) {
			res = executecode.Result{Content: []executecode.Content{{Type: "error", Text: err.Error()}}}
		}
		ch <- res
	}()
	return ch
}

func receive(t *testing.T, ch <-chan executecode.Result, within time.Duration) executecode.Result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(within):
		t.Fatalf("no result within %s", within)
	}
	return executecode.Result{}
}

// Interrupt and timeout escalate on the kernel's whole process group: a
// grandchild that ignores SIGINT and SIGTERM sees the SIGINT and is gone
// by the end of the escalation, and so is a kernel that ignores both too.
func TestSessionTimeoutAndCancelReachEveryProcessOfTheKernelGroup(t *testing.T) {
	for _, tc := range []struct {
		name        string
		kernelStays bool // the cell ignores SIGINT and SIGTERM as well
		cancel      bool // the caller cancels instead of the deadline
	}{
		{"timeout", false, false},
		{"timeout, kernel ignores signals", true, false},
		{"cancel", false, true},
		{"cancel, kernel ignores signals", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := sessionEnv(t, nil)
			o := e.attach("s1")
			log := filepath.Join(e.root, "grandchild.log")
			script := writePID("kernel.pid") + spawnStubborn(log)
			if tc.kernelStays {
				script += ignoreSignals
			}
			script += "text('spawned')\n" + writePID("spawned.pid") + "while True:\n    time.sleep(0.05)\n"
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timeoutMS := 2000
			if tc.cancel {
				timeoutMS = 60000
			}
			start := time.Now()
			ch := e.asyncCell(ctx, o, script, timeoutMS)
			kernel := pidFile(t, filepath.Join(e.root, "kernel.pid"))
			grandchild := readyPID(t, log)
			pidFile(t, filepath.Join(e.root, "spawned.pid"))
			if tc.cancel {
				cancel()
				start = time.Now()
				timeoutMS = 0
			}
			res := receive(t, ch, time.Duration(timeoutMS)*time.Millisecond+escalation)
			assert.False(t, boolp(res.Details.StateRetained))
			want := map[bool]string{false: "timeout", true: "cancelled"}[tc.cancel]
			assert.Equal(t, want, string(res.Details.KilledBy))
			assert.Equal(t, []string{"spawned"}, res.Blocks)

			bound := time.Duration(timeoutMS)*time.Millisecond + escalation
			left := proctest.WaitGone([]int{kernel, grandchild}, time.Until(start.Add(bound)))
			assert.Empty(t, left, "kernel %d and grandchild %d must be gone %s after the deadline", kernel, grandchild, escalation)
			got, _ := os.ReadFile(log)
			assert.Contains(t, string(got), "SIGINT", "the interrupt reached the grandchild")
			t.Logf("%s: gone %s after the deadline; grandchild saw %q", tc.name, time.Since(start)-time.Duration(timeoutMS)*time.Millisecond,
				strings.Fields(strings.SplitN(string(got), "\n", 2)[1]))

			next := e.cell(o, "text(str('spawned' in dir()))")
			assert.False(t, boolp(next.Details.KernelReused), "a fresh kernel after the discard")
		})
	}
}

// A dead owner (Detach from another goroutine while its cell runs) loses
// the kernel at once; its queued cells are answered without running, and
// nothing of the kernel's group is left.
func TestOwnerDeathMidCellDiscardsTheKernelAndAnswersItsQueue(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("s1")
	log := filepath.Join(e.root, "grandchild.log")
	running := e.asyncCell(context.Background(), o, writePID("kernel.pid")+spawnStubborn(log)+"text('running')\n"+writePID("running.pid")+"time.sleep(60)\n", 60000)
	kernel := pidFile(t, filepath.Join(e.root, "kernel.pid"))
	grandchild := readyPID(t, log)
	pidFile(t, filepath.Join(e.root, "running.pid"))
	var queued []<-chan executecode.Result
	for i := range 3 {
		queued = append(queued, e.asyncCell(context.Background(), o, fmt.Sprintf("open('queued-%d', 'w').close()", i), 60000))
	}
	waitSnapshot(t, e, func(s executecode.Snapshot) bool { return s.InflightCells >= 4 })

	start := time.Now()
	require.NoError(t, o.Detach(context.Background()))
	res := receive(t, running, escalation)
	assert.Equal(t, executecode.KilledByOwnerGone, res.Details.KilledBy)
	assert.False(t, boolp(res.Details.StateRetained))
	assert.Equal(t, []string{"running"}, res.Blocks)
	for i, ch := range queued {
		q := receive(t, ch, escalation)
		require.NotNil(t, q.Details, "queued cell %d: %s", i, q.Text())
		assert.Equal(t, executecode.ReasonOwnerGone, q.Details.Reason, "queued cell %d: %s", i, q.Text())
		assert.False(t, boolp(q.Details.StateRetained))
		assert.NoFileExists(t, filepath.Join(e.root, fmt.Sprintf("queued-%d", i)), "a queued cell never runs")
	}
	assert.Empty(t, proctest.WaitGone([]int{kernel, grandchild}, time.Until(start.Add(escalation))), "the kernel's group is gone within the escalation")
	waitSnapshot(t, e, func(s executecode.Snapshot) bool { return s.Capacity.Live == 0 && s.InflightCells == 0 })
}

// waitSnapshot polls the runtime's snapshot until ok holds (10 s at most).
func waitSnapshot(t *testing.T, e *env, ok func(executecode.Snapshot) bool) executecode.Snapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.rt.Snapshot(context.Background())
		require.NoError(t, err)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot never reached the expected state: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A kernel that stops answering mid-cell (its runner SIGSTOPped) is
// answered at the deadline and discarded within the escalation; so is a
// kernel stopped while idle, when its next cell comes.
func TestStoppedKernelIsDetectedAndDiscardedAtTheDeadline(t *testing.T) {
	t.Run("stopped mid-cell", func(t *testing.T) {
		e := sessionEnv(t, nil)
		o := e.attach("s1")
		e.cell(o, "kept = 1")
		start := time.Now()
		ch := e.asyncCell(context.Background(), o, writePID("kernel.pid")+"import signal\ntext('stopping')\nos.kill(os.getpid(), signal.SIGSTOP)\n", 1500)
		kernel := pidFile(t, filepath.Join(e.root, "kernel.pid"))
		res := receive(t, ch, 1500*time.Millisecond+escalation)
		assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
		assert.True(t, strings.HasPrefix(res.Text(), "Script timed out after 1500ms."), res.Text())
		assert.Empty(t, proctest.WaitGone([]int{kernel}, time.Until(start.Add(1500*time.Millisecond+escalation))))
		assert.Equal(t, []string{"False"}, e.cell(o, "text(str('kept' in dir()))").Blocks)
	})
	t.Run("stopped while idle", func(t *testing.T) {
		e := sessionEnv(t, nil)
		o := e.attach("s1")
		e.cell(o, writePID("kernel.pid")+"kept = 1")
		kernel := pidFile(t, filepath.Join(e.root, "kernel.pid"))
		require.NoError(t, syscall.Kill(kernel, syscall.SIGSTOP))
		start := time.Now()
		res := e.cell(o, "text('never')", 1500)
		assert.Less(t, time.Since(start), 1500*time.Millisecond+escalation)
		assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
		assert.Empty(t, res.Blocks)
		assert.Empty(t, proctest.WaitGone([]int{kernel}, time.Until(start.Add(1500*time.Millisecond+escalation))))
		assert.Equal(t, []string{"False"}, e.cell(o, "text(str('kept' in dir()))").Blocks)
	})
	t.Run("per call", func(t *testing.T) {
		e := newEnv(t, nil)
		start := time.Now()
		res := e.run("import os, signal\ntext('stopping')\nos.kill(os.getpid(), signal.SIGSTOP)\n", 1500)
		assert.Less(t, time.Since(start), 1500*time.Millisecond+escalation)
		assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
		assert.Equal(t, []string{"stopping"}, res.Blocks)
	})
}

// A grandchild that leaves the group (setsid) and keeps the output open
// cannot hold a run past its end: the drain is bounded. Containing such a
// descendant is the sandbox's job (docs/architecture.md, Rules: no
// survivors), so the test kills it.
func TestGrandchildHoldingTheOutputOpenCannotDelayTheResult(t *testing.T) {
	const holder = `
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os, time\nos.setsid()\ntime.sleep(0.3)\nprint('late', flush=True)\ntime.sleep(120)"])
print('script done', flush=True)
text('done')
`
	t.Run("per call", func(t *testing.T) {
		e := newEnv(t, nil)
		defer killMarked(e.mark)
		start := time.Now()
		res := e.run(holder, 5000)
		elapsed := time.Since(start)
		killMarked(e.mark)
		assert.Equal(t, []string{"done"}, res.Blocks)
		assert.Equal(t, 0, *res.Details.ExitCode)
		assert.Less(t, elapsed, 5*time.Second+escalation, "the run ends on time")
		t.Logf("per call: result after %s", elapsed)
	})
	t.Run("session", func(t *testing.T) {
		e := sessionEnv(t, nil)
		defer killMarked(e.mark)
		o := e.attach("s1")
		start := time.Now()
		res := e.cell(o, holder, 5000)
		elapsed := time.Since(start)
		assert.Equal(t, []string{"done"}, res.Blocks)
		assert.True(t, boolp(res.Details.StateRetained))
		assert.Less(t, elapsed, 5*time.Second+escalation, "the cell ends on time")
		next := e.cell(o, "text('next')", 5000)
		assert.Equal(t, []string{"next"}, next.Blocks)
		start = time.Now()
		require.NoError(t, o.Detach(context.Background()))
		waitSnapshot(t, e, func(s executecode.Snapshot) bool { return s.Capacity.Live == 0 })
		assert.Less(t, time.Since(start), escalation, "the kernel stops on time")
		killMarked(e.mark)
		t.Logf("session: cell result after %s", elapsed)
	})
}

// A run or cell killed by a limit says which one, in killed_by and in the
// headline. A session cell's MemoryError keeps its kernel (it is an
// exception in python) but still names the limit in killed_by.
func TestLimitKillsSayWhichLimitInBothModes(t *testing.T) {
	cpu := func(c *config.Config) { c.CPULimitSeconds = 1 }
	mem := func(c *config.Config) { c.MemoryLimitMB = 256 }
	const spin = "text('spinning')\nwhile True:\n    pass\n"
	const alloc = "text('allocating')\nx = bytearray(1 << 30)\n"
	t.Run("cpu per call", func(t *testing.T) {
		res := newEnv(t, nil, withConfig(cpu)).run(spin, 20000)
		assert.Equal(t, executecode.KilledByCPULimit, res.Details.KilledBy)
		assert.True(t, strings.HasPrefix(res.Text(), "Script killed: CPU limit (1 s) exceeded."), res.Text())
		assert.Equal(t, []string{"spinning"}, res.Blocks)
	})
	t.Run("cpu session", func(t *testing.T) {
		e := sessionEnv(t, nil, withConfig(cpu))
		o := e.attach("s1")
		res := e.cell(o, spin, 20000)
		assert.Equal(t, executecode.KilledByCPULimit, res.Details.KilledBy)
		assert.False(t, boolp(res.Details.StateRetained))
		assert.True(t, strings.HasPrefix(res.Text(), "Script killed: CPU limit (1 s) exceeded."), res.Text())
		assert.Equal(t, []string{"spinning"}, res.Blocks)
	})
	t.Run("memory per call", func(t *testing.T) {
		res := newEnv(t, nil, withConfig(mem)).run(alloc, 20000)
		assert.Equal(t, executecode.KilledByMemoryLimit, res.Details.KilledBy)
		assert.True(t, strings.HasPrefix(res.Text(), "Script killed: memory limit (256 MB) exceeded."), res.Text())
		assert.Equal(t, []string{"allocating"}, res.Blocks)
	})
	t.Run("memory session", func(t *testing.T) {
		e := sessionEnv(t, nil, withConfig(mem))
		o := e.attach("s1")
		e.cell(o, "kept = 1")
		res := e.cell(o, alloc, 20000)
		assert.Equal(t, executecode.KilledByMemoryLimit, res.Details.KilledBy)
		assert.Contains(t, res.Text(), "MemoryError")
		assert.Equal(t, []string{"allocating"}, res.Blocks)
		assert.True(t, boolp(res.Details.StateRetained), "a MemoryError is an exception: the kernel survives it")
		assert.Equal(t, []string{"True"}, e.cell(o, "text(str('kept' in dir()))").Blocks)
	})
}

// vmHWM reads the peak resident set of this process in KiB.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// resetHWM starts a new peak-RSS measurement (clear_refs "5"); it reports
// false where the kernel does not allow it.
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// floodMB is how much output the flood test writes: 200 MB, but 40 MB
// through a session kernel under -race, where every frame costs the race
// detector a minute's worth for the whole; FLOOD_MB overrides. The CLI's
// flood test (cmd/execute-code) runs an uninstrumented host at 200 MB in
// both modes.
func floodMB(session bool) int {
	if n, err := strconv.Atoi(os.Getenv("FLOOD_MB")); err == nil && n > 0 {
		return n
	}
	if session && raceDetector {
		return 40
	}
	return 200
}

// 200 MB of output at full speed: the host keeps a bounded copy (its peak
// RSS, reset before the run, grows by less than 64 MiB), the result says
// truncated with the marker, the spill holds every byte.
func TestOutputFloodKeepsHostMemoryBoundedAndSpillsEverything(t *testing.T) {
	for _, mode := range []string{"per call", "session"} {
		t.Run(mode, func(t *testing.T) {
			mb := floodMB(mode == "session")
			script := fmt.Sprintf(`
import sys
line = b"x" * 1023 + b"\n"
chunk = line * 64
w = sys.stdout.buffer
for _ in range(%d):
    w.write(chunk)
w.flush()
text("flooded")
`, mb*16)
			var e *env
			var run func() executecode.Result
			if mode == "session" {
				e = sessionEnv(t, nil)
				o := e.attach("s1")
				run = func() executecode.Result { return e.cell(o, script, 120000) }
			} else {
				e = newEnv(t, nil)
				run = func() executecode.Result { return e.run(script, 120000) }
			}
			measured := resetHWM()
			before := vmHWM(t)
			start := time.Now()
			res := run()
			elapsed := time.Since(start)
			peak := vmHWM(t)
			d := res.Details
			assert.Equal(t, []string{"flooded"}, res.Blocks)
			require.True(t, d.Truncated)
			require.NotEmpty(t, d.FullOutputPath)
			assert.Regexp(t, `\.\.\. \[\d+ bytes truncated\] \.\.\.`, res.Text())
			assert.Contains(t, res.Text(), "[Full output saved to: <spill>/"+filepath.Base(d.FullOutputPath)+"]")
			assert.Less(t, len(res.Text()), 2*config.Defaults().MaxOutputBytes)
			fi, err := os.Stat(d.FullOutputPath)
			require.NoError(t, err)
			assert.Equal(t, int64(mb)<<20, fi.Size(), "the spill holds all of it")
			require.NoError(t, os.Remove(d.FullOutputPath))
			growth := peak - before
			if measured {
				assert.Less(t, growth, int64(64<<10), "peak RSS grew %d KiB for %d MiB of output", growth, mb)
			}
			t.Logf("%s: %d MiB in %s (%.0f MiB/s); host peak RSS %d KiB -> %d KiB (+%d KiB, reset %v)",
				mode, mb, elapsed.Round(time.Millisecond), float64(mb)/elapsed.Seconds(), before, peak, growth, measured)
		})
	}
}

// An embedding host that runs with SIGINT ignored (ignored signals survive
// fork and exec) still gets interrupts into python: the launcher resets
// SIGINT to the default, so a session timeout's SIGINT is a
// KeyboardInterrupt in the cell.
func TestHostIgnoringSIGINTStillInterruptsPython(t *testing.T) {
	signal.Ignore(syscall.SIGINT)
	defer signal.Reset(syscall.SIGINT)
	require.True(t, sigintIgnored(t, "self"), "precondition: this host ignores SIGINT")

	const probe = `import os, signal
st = open("/proc/self/status").read()
ign = int([l for l in st.splitlines() if l.startswith("SigIgn:")][0].split()[1], 16)
text("ignored: %s" % bool(ign & (1 << (signal.SIGINT - 1))))
text("default handler: %s" % (signal.getsignal(signal.SIGINT) is signal.default_int_handler))
`
	want := []string{"ignored: False", "default handler: True"}
	assert.Equal(t, want, newEnv(t, nil).run(probe).Blocks, "per call")

	e := sessionEnv(t, nil)
	o := e.attach("s1")
	assert.Equal(t, want, e.cell(o, probe).Blocks, "session")
	res := e.cell(o, `import time
try:
    time.sleep(60)
except KeyboardInterrupt:
    open("interrupted", "w").close()
    raise
`, 1500)
	assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
	assert.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(e.root, "interrupted"))
		return err == nil
	}, escalation, 10*time.Millisecond, "the timeout's SIGINT reached the cell as KeyboardInterrupt")
}

// sigintIgnored reads SigIgn of /proc/<pid>/status.
func sigintIgnored(t *testing.T, pid string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			require.NoError(t, err)
			return mask&(1<<(uint(syscall.SIGINT)-1)) != 0
		}
	}
	t.Fatal("no SigIgn line")
	return false
}

// regrouped is a script fragment starting a sleeper that leaves python's
// process group for one of its own (it stays in python's session) and
// writing its pid to name.
func regrouped(name string) string {
	return fmt.Sprintf(`import subprocess, sys
_p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], process_group=0)
with open(%[1]q + ".tmp", "w") as _f:
    _f.write("%%d\n" %% _p.pid)
os.replace(%[1]q + ".tmp", %[1]q)
`, name)
}

// A child that moved to a process group of its own is out of reach of the
// group kill at a run's end, but not of the runtime: it is still in
// python's session, and the host's guard sweeps that session once the
// run's interpreter or the kernel is gone.
func TestChildInAGroupOfItsOwnDoesNotOutliveItsRun(t *testing.T) {
	t.Run("per call", func(t *testing.T) {
		e := newEnv(t, nil)
		res := e.run(writePID("py.pid") + regrouped("child.pid") + "text('left')\n")
		require.Equal(t, []string{"left"}, res.Blocks, "%+v", res)
		child := pidFile(t, filepath.Join(e.root, "child.pid"))
		assert.Empty(t, proctest.WaitGone([]int{child}, 3*time.Second), "the regrouped child must not outlive the run")
	})
	t.Run("session kernel discarded by a timeout", func(t *testing.T) {
		e := sessionEnv(t, nil)
		o := e.attach("s1")
		res := e.cell(o, writePID("py.pid")+regrouped("child.pid")+"import time\ntext('spawned')\ntime.sleep(60)\n", 1000)
		assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
		child := pidFile(t, filepath.Join(e.root, "child.pid"))
		assert.Empty(t, proctest.WaitGone([]int{child}, 3*time.Second), "the regrouped child must not outlive its kernel")
	})
}
