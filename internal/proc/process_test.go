package proc

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// stubbornFamily forks a grandchild; both ignore SIGINT and SIGTERM and
// hold stdout open, and both say so once they are set up.
const stubbornFamily = `
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid = os.fork()
# One write per line: the two processes share the pipe.
os.write(1, b"%s %d\n" % (b"grandchild" if pid == 0 else b"leader", os.getpid()))
while True:
    time.sleep(1)
`

func TestInterruptEscalatesToKillingTheWholeGroup(t *testing.T) {
	sp := newSpawner(t)
	p, out := startPython(t, sp, Limits{}, stubbornFamily)
	require.True(t, out.waitFor("grandchild", hangGuard) && out.waitFor("leader", hangGuard), out.String())
	grandchild := proctest.PidsIn(t, out.String(), "grandchild")
	require.Len(t, grandchild, 1, "output: %q", out.String())

	p.Interrupt(context.Background(), 50*time.Millisecond)
	waitDone(t, p)

	st := p.Exit()
	assert.True(t, st.Signaled)
	assert.Equal(t, syscall.SIGKILL, st.Signal, "SIGINT and SIGTERM were ignored")
	assert.True(t, st.StopRequested)
	proctest.Reap(t, grandchild[0], hangGuard)
	assert.True(t, proctest.GroupGone(p.Pid()), "no process of the group remains")
}

func TestInterruptReturnsOnceKeyboardInterruptEndsPython(t *testing.T) {
	sp := newSpawner(t)
	p, out := startPython(t, sp, Limits{}, "import time\nprint('ready', flush=True)\ntime.sleep(600)")
	require.True(t, out.waitFor("ready", hangGuard), out.String())

	p.Interrupt(context.Background(), hangGuard)
	select {
	case <-p.Done():
	default:
		t.Fatal("Interrupt returned before the child was done")
	}
	st := p.Exit()
	assert.Contains(t, out.String(), "KeyboardInterrupt")
	assert.True(t, st.Signaled, "python re-raises SIGINT when KeyboardInterrupt is uncaught")
	assert.Equal(t, syscall.SIGINT, st.Signal)
}

func TestInterruptWithCancelledContextKillsAtOnce(t *testing.T) {
	sp := newSpawner(t)
	p, out := startPython(t, sp, Limits{}, stubbornFamily)
	require.True(t, out.waitFor("grandchild", hangGuard) && out.waitFor("leader", hangGuard), out.String())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	p.Interrupt(ctx, time.Hour)
	waitDone(t, p)
	assert.Equal(t, syscall.SIGKILL, p.Exit().Signal)
	for _, pid := range proctest.PidsIn(t, out.String(), "grandchild") {
		proctest.Reap(t, pid, hangGuard)
	}
	assert.True(t, proctest.GroupGone(p.Pid()))
}

func TestLeaderExitKillsWhatItLeftInItsGroup(t *testing.T) {
	sp := newSpawner(t)
	script := `
import os, time
pid = os.fork()
if pid == 0:
    time.sleep(600)
else:
    print("background", pid, flush=True)
`
	out, st := runPython(t, sp, Limits{}, script)
	assert.Equal(t, 0, st.Code)
	assert.False(t, st.StopRequested)
	background := proctest.PidsIn(t, out, "background")
	require.Len(t, background, 1)
	proctest.Reap(t, background[0], hangGuard)
	assert.True(t, proctest.GroupGone(background[0]), "the lingering child was killed with its group")
}

func TestEscapedDescendantCannotHoldDoneOpen(t *testing.T) {
	sp := newSpawner(t)
	// The grandchild leaves the group with its own session and keeps the
	// output pipe open; only the drain bound ends the run.
	script := `
import os, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    os.write(w, b"x")
    time.sleep(600)
else:
    os.read(r, 1)
    print("escaped", pid, flush=True)
`
	p, out := startPython(t, sp, Limits{}, script)
	waitDone(t, p)
	escaped := proctest.PidsIn(t, out.String(), "escaped")
	require.Len(t, escaped, 1)
	t.Cleanup(func() {
		_ = unix.Kill(escaped[0], unix.SIGKILL)
		proctest.Reap(t, escaped[0], hangGuard)
	})

	assert.Equal(t, 0, p.Exit().Code)
	assert.Nil(t, unix.Kill(escaped[0], 0), "setsid escapes group signals (sandbox mode's job)")
}

func TestKillIsIdempotentAndSafeAfterDone(t *testing.T) {
	sp := newSpawner(t)
	p, out := startPython(t, sp, Limits{}, "import time\nprint('ready', flush=True)\ntime.sleep(600)")
	require.True(t, out.waitFor("ready", hangGuard))

	p.Kill()
	p.Kill()
	waitDone(t, p)
	p.Kill()
	p.Interrupt(context.Background(), time.Hour) // returns at once: already reaped
	assert.Equal(t, syscall.SIGKILL, p.Exit().Signal)
	assert.Equal(t, 128+9, p.Exit().Code)
	assert.True(t, proctest.GroupGone(p.Pid()))
}

func TestOutputIsDrainedBeforeDone(t *testing.T) {
	sp := newSpawner(t)
	out, st := runPython(t, sp, Limits{}, "import sys; sys.stdout.write('y' * (1 << 20))")
	require.Equal(t, 0, st.Code)
	assert.Equal(t, 1<<20, len(out))
}

type failingWriter struct{ calls int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls++
	return 0, errors.New("consumer gone")
}

func TestFailingOutputStillDrainsThePipe(t *testing.T) {
	sp := newSpawner(t)
	w := &failingWriter{}
	p, err := sp.Start(context.Background(), Command{
		Path:   proctest.Python(t),
		Args:   []string{"-c", "import sys; sys.stdout.write('z' * (4 << 20))"},
		Output: w,
	})
	require.NoError(t, err)
	waitDone(t, p)
	assert.Equal(t, 0, p.Exit().Code, "python never blocked on a full pipe")
	assert.Equal(t, 1, w.calls, "a failed Output is not written again")
}

func TestConcurrentStartsAllRun(t *testing.T) {
	sp := newSpawner(t)
	var wg sync.WaitGroup
	outs := make([]string, 8)
	codes := make([]int, 8)
	for i := range outs {
		wg.Go(func() {
			buf := newSyncBuffer()
			p, err := sp.Start(context.Background(), Command{
				Path:   proctest.Python(t),
				Args:   []string{"-c", "import sys; print(sys.argv[1])", strconv.Itoa(i)},
				Output: buf,
			})
			if err != nil {
				outs[i] = err.Error()
				return
			}
			<-p.Done()
			outs[i], codes[i] = buf.String(), p.Exit().Code
		})
	}
	wg.Wait()
	for i := range outs {
		assert.Equal(t, strconv.Itoa(i)+"\n", outs[i])
		assert.Equal(t, 0, codes[i])
	}
}

func TestStartRefusesCancelledContextAndClosedSpawner(t *testing.T) {
	sp := NewSpawner()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := sp.Start(ctx, Command{Path: proctest.Python(t)})
	assert.ErrorIs(t, err, context.Canceled)

	sp.Close()
	sp.Close()
	_, err = sp.Start(context.Background(), Command{Path: proctest.Python(t)})
	assert.ErrorIs(t, err, ErrClosed)
}

func TestStartReportsMissingWorkingDirectory(t *testing.T) {
	sp := newSpawner(t)
	_, err := sp.Start(context.Background(), Command{Path: proctest.Python(t), Dir: t.TempDir() + "/missing"})
	assert.ErrorIs(t, err, syscall.ENOENT)
}

func TestSpawnerCloseKillsChildrenStillAlive(t *testing.T) {
	sp := NewSpawner()
	out := newSyncBuffer()
	p, err := sp.Start(context.Background(), Command{
		Path:   proctest.Python(t),
		Args:   []string{"-c", "import time\nprint('ready', flush=True)\ntime.sleep(600)"},
		Output: out,
	})
	require.NoError(t, err)
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	require.True(t, out.waitFor("ready", hangGuard))

	sp.Close() // the spawning thread exits: the parent-death signal fires
	waitDone(t, p)
	st := p.Exit()
	assert.Equal(t, syscall.SIGKILL, st.Signal)
	assert.False(t, st.StopRequested, "nobody here called Kill")
}

// A host killed with SIGKILL takes python with it (parent-death signal)
// and, through its guard, python's children: the one in python's group and
// the one that moved to a group of its own.
func TestHostDeathTakesPythonAndItsChildrenWithIt(t *testing.T) {
	host, pids := startHelperHost(t)
	require.Len(t, pids, 4, "python, two grandchildren, the guard")
	python, guardPid := pids[0], pids[3]
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
			proctest.Reap(t, pid, hangGuard)
		}
	})

	require.NoError(t, host.Process.Signal(syscall.SIGKILL))
	_ = host.Wait()

	deadline := time.Now().Add(hangGuard)
	for _, pid := range pids {
		for proctest.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !assert.False(t, proctest.Alive(pid), "process %d outlived its SIGKILLed host", pid) {
			_ = unix.Kill(pid, unix.SIGKILL) // so the reaping below cannot hang
		}
	}

	// The orphans came to this subreaper; their statuses say who killed
	// them, and the guard ended by itself once its work was done.
	for _, pid := range pids {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, 0, nil)
		require.NoError(t, err)
		require.Equal(t, pid, got)
		if pid == guardPid {
			assert.True(t, ws.Exited() && ws.ExitStatus() == 0, "guard status %v", ws)
			continue
		}
		assert.Equal(t, syscall.SIGKILL, ws.Signal(), "process %d (python is %d)", pid, python)
	}
}

// BenchmarkStartPython measures a full start-to-Done of `python3 -c pass`
// through the Spawner (handshake, every limit set with prlimit, guard
// registration, Bootstrap), against the same run started directly; the
// difference is the Spawner's cost.
func BenchmarkStartPython(b *testing.B) {
	py := proctest.Python(b)
	b.Run("spawner", func(b *testing.B) {
		sp := NewSpawner()
		defer sp.Close()
		lim := Limits{CPUSeconds: 30, MemoryMB: 512, FsizeMB: 50, NProc: 500}
		for b.Loop() {
			p, err := sp.Start(context.Background(), Command{Path: py, Args: []string{"-c", Bootstrap + "pass"}, Limits: lim})
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(py, "-c", "pass").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// startHelperHost starts this test binary as a host (helperHostEnv) with
// the extra environment given, and returns it with the pids it reports on
// its first line ("pids …"); the test's cleanup kills and reaps it.
func startHelperHost(t *testing.T, env ...string) (*exec.Cmd, []int) {
	t.Helper()
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(append(os.Environ(), helperHostEnv+"=1", helperPythonEnv+"="+proctest.Python(t)), env...)
	stderr := newSyncBuffer()
	host.Stderr = stderr
	stdout, err := host.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, host.Start())
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(hangGuard):
		t.Fatalf("helper host said nothing; stderr: %s", stderr.String())
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "pids ")
	require.True(t, ok, "helper host: %q, stderr: %s", line, stderr.String())
	var pids []int
	for _, f := range strings.Fields(rest) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return host, pids
}
