package kernelworker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/privatetmp"
	"github.com/executecode/executecode/shimpy"
	"github.com/executecode/executecode/telemetry"
)

// kernelHarness runs worker actors in a fresh actor system with real
// python3 kernels, a private staging root in a test temp dir and a
// telemetry recorder.
type kernelHarness struct {
	t      testing.TB
	system *actor.ActorSystem
	root   string
	rec    *telemetry.Recorder
	opts   Options

	mu    sync.Mutex
	exits []Exit
	gone  map[string]<-chan struct{} // worker id → closed at its Terminated
}

func newKernelHarness(t testing.TB, mods ...func(*Options)) *kernelHarness {
	t.Helper()
	python := proctest.Python(t)
	root := filepath.Join(t.TempDir(), "execute-code-private-test")
	require.NoError(t, os.Mkdir(root, 0o700))
	h := &kernelHarness{
		t:      t,
		system: actor.NewActorSystem(actor.WithLoggerFactory(quietLogger)),
		root:   root,
		rec:    &telemetry.Recorder{},
		gone:   map[string]<-chan struct{}{},
	}
	bus := &telemetry.Bus{}
	bus.Subscribe(h.rec)
	sp := proc.NewSpawner()
	cwd := t.TempDir()
	h.opts = Options{
		Key:          "test-key",
		Generation:   7,
		Cwd:          cwd,
		Interpreter:  python,
		HelperSource: shimpy.RenderModule(nil, 0),
		Spawner:      sp,
		Workspace:    func() (string, error) { return privatetmp.ReserveDir(root, "python-kernel") },
		Spill:        func() (*os.File, error) { return privatetmp.ReserveFile(root, privatetmp.SpillPrefix) },
		Telemetry:    bus,
		OnExit: func(e Exit) {
			h.mu.Lock()
			h.exits = append(h.exits, e)
			h.mu.Unlock()
		},
	}
	for _, m := range mods {
		m(&h.opts)
	}
	t.Cleanup(func() {
		sp.Close()
		h.system.Shutdown()
	})
	return h
}

func quietLogger(*actor.ActorSystem) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeRunner is the fault-injection runner of testdata.
func fakeRunner(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fake_runner.py"))
	require.NoError(t, err)
	return string(b)
}

// start boots a worker and registers a cleanup that stops it and waits
// until it is gone, so no kernel outlives its test.
func (h *kernelHarness) start() *actor.PID {
	h.t.Helper()
	return h.startHandle().PID
}

func (h *kernelHarness) startHandle() Handle {
	h.t.Helper()
	handle, err := h.tryStartHandle()
	require.NoError(h.t, err)
	return handle
}

// tryStartHandle is startHandle for a start that may fail: the error is
// Start's, and nothing is registered then.
func (h *kernelHarness) tryStartHandle() (Handle, error) {
	h.t.Helper()
	handle, err := Start(h.system.Root, h.opts)
	if err != nil {
		return handle, err
	}
	require.NotNil(h.t, handle.Bells)
	gone := h.watch(handle.PID)
	h.mu.Lock()
	h.gone[handle.PID.Id] = gone
	h.mu.Unlock()
	h.t.Cleanup(func() {
		select {
		case <-gone:
			return // a message to it now would only be a dead letter
		default:
		}
		h.system.Root.Send(handle.PID, &Stop{Reason: KilledByShutdown})
		select {
		case <-gone:
		case <-time.After(hangGuard):
			h.t.Errorf("worker %s never stopped", handle.PID.Id)
		}
	})
	return handle, nil
}

// watch returns a channel closed when pid has terminated.
func (h *kernelHarness) watch(pid *actor.PID) <-chan struct{} {
	done := make(chan struct{})
	h.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(pid)
		case *actor.Terminated:
			if m.Who.Equal(pid) {
				close(done)
				ctx.Stop(ctx.Self())
			}
		}
	}))
	return done
}

func (h *kernelHarness) waitGone(pid *actor.PID) {
	h.t.Helper()
	h.mu.Lock()
	gone := h.gone[pid.Id]
	h.mu.Unlock()
	require.NotNil(h.t, gone, "worker not started by this harness")
	select {
	case <-gone:
	case <-time.After(hangGuard):
		h.t.Fatalf("worker %s never stopped", pid.Id)
	}
}

// cellOpts adjust one Execute.
type cellOpt func(*Execute)

func withCtx(ctx context.Context) cellOpt   { return func(e *Execute) { e.Ctx = ctx } }
func withTimeout(d time.Duration) cellOpt   { return func(e *Execute) { e.Timeout = d } }
func withCPUBudget(d time.Duration) cellOpt { return func(e *Execute) { e.CPUBudget = d } }
func withDeadline(t time.Time) cellOpt      { return func(e *Execute) { e.Deadline = t } }

// submit sends one cell and returns where its result will arrive.
func (h *kernelHarness) submit(pid *actor.PID, code string, opts ...cellOpt) <-chan CellResult {
	reply := make(chan CellResult, 1)
	e := &Execute{Ctx: context.Background(), Code: code, Timeout: hangGuard, Reply: reply}
	for _, o := range opts {
		o(e)
	}
	h.system.Root.Send(pid, e)
	return reply
}

func (h *kernelHarness) result(reply <-chan CellResult) CellResult {
	h.t.Helper()
	select {
	case r := <-reply:
		return r
	case <-time.After(hangGuard):
		h.t.Fatal("no cell result")
		return CellResult{}
	}
}

// run executes one cell and waits for its result.
func (h *kernelHarness) run(pid *actor.PID, code string, opts ...cellOpt) CellResult {
	h.t.Helper()
	return h.result(h.submit(pid, code, opts...))
}

// noSecondResult checks that a result channel stays empty.
func noSecondResult(t testing.TB, reply <-chan CellResult) {
	t.Helper()
	select {
	case r := <-reply:
		t.Fatalf("second result on one Execute: %+v", r)
	default:
	}
}

func (h *kernelHarness) status(pid *actor.PID) *Status {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(pid, &StatusRequest{}, hangGuard).Result()
	require.NoError(h.t, err)
	st, ok := res.(*Status)
	require.True(h.t, ok, "status answer %T", res)
	return st
}

// waitPhase polls Status until the worker reports phase.
func (h *kernelHarness) waitPhase(pid *actor.PID, phase Phase) {
	h.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		if h.status(pid).Phase == phase {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("worker never reached phase %s", phase)
}

// workspaces lists the kernel workspaces left in the staging root.
func (h *kernelHarness) workspaces() []string {
	h.t.Helper()
	m, err := filepath.Glob(filepath.Join(h.root, "python-kernel-*"))
	require.NoError(h.t, err)
	return m
}

// events returns the names of the recorded cell events, in order.
func (h *kernelHarness) cellEvents() []string {
	var names []string
	for _, e := range h.rec.Events() {
		switch e := e.(type) {
		case telemetry.CellStart:
			names = append(names, "start")
		case telemetry.CellStop:
			names = append(names, "stop:"+string(e.Outcome))
		case telemetry.CellCancel:
			names = append(names, "cancel:"+string(e.Cause))
		}
	}
	return names
}

func (h *kernelHarness) exitsSoFar() []Exit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Exit(nil), h.exits...)
}

// pidLine extracts the integer printed after label in out.
func pidLine(t *testing.T, out, label string) int {
	t.Helper()
	pids := proctest.PidsIn(t, strings.TrimSpace(out), label)
	require.NotEmpty(t, pids, "no %q line in %q", label, out)
	return pids[0]
}

// gate is a file a cell waits for, so a test decides when the cell moves
// on (for instance only after it has queued more cells behind it).
type gate struct {
	t    testing.TB
	path string
}

func newGate(t testing.TB) gate {
	return gate{t: t, path: filepath.Join(t.TempDir(), "gate")}
}

// wait is python that blocks until the gate opens.
func (g gate) wait() string {
	return "import os as _os, time as _time\nwhile not _os.path.exists(" + strconv.Quote(g.path) + "):\n    _time.sleep(0.005)\n"
}

func (g gate) open() {
	g.t.Helper()
	require.NoError(g.t, os.WriteFile(g.path, nil, 0o600))
}

// waitQueue polls Status until depth cells wait in the queue.
func (h *kernelHarness) waitQueue(pid *actor.PID, depth int) {
	h.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		if h.status(pid).QueueDepth == depth {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("queue never reached depth %d", depth)
}
