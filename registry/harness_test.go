package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

// askTimeout only keeps a broken test from hanging; no test asserts a time.
const askTimeout = 10 * time.Second

// eventually polls async outcomes (a worker's Terminated reaching the
// registry); it bounds a broken test, it measures nothing.
const (
	eventuallyWait = 10 * time.Second
	eventuallyTick = 2 * time.Millisecond
)

// fakeClock is the registry's injected clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness runs one registry actor over fake workers.
type harness struct {
	t     testing.TB
	sys   *actor.ActorSystem
	reg   *actor.PID
	clock *fakeClock
	rec   *telemetry.Recorder

	mu       sync.Mutex
	dir      string
	fakes    map[uint64]*actor.PID // by generation
	stops    map[uint64][]string   // Stop reasons each worker received
	owners   []*actor.PID
	starts   int
	failNext int
	// onStart, when set, shapes each new fake before it is spawned.
	onStart func(gen uint64, w *fakeWorker)
	// gate, when set, runs first in every start, outside the lock: a
	// test holds a start there.
	gate func(ctx context.Context, key Key, gen uint64)
}

func newHarness(t testing.TB, tune ...func(*Config)) *harness {
	t.Helper()
	// Registered first, so it runs after every other cleanup. A
	// sub-benchmark runs beside its parent's goroutines: those are not
	// ours to check.
	var leakOpts []goleak.Option
	if _, bench := t.(*testing.B); bench {
		leakOpts = append(leakOpts, goleak.IgnoreCurrent())
	}
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}),
		// The dead-letter log throttle runs a goroutine for one interval
		// after a dead letter (a message to a stopped worker); a short
		// interval lets it end with the test instead of outliving it.
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	h := &harness{
		t: t, sys: sys,
		clock: &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		rec:   &telemetry.Recorder{},
		fakes: map[uint64]*actor.PID{},
		stops: map[uint64][]string{},
	}
	bus := &telemetry.Bus{}
	bus.Subscribe(h.rec)
	cfg := Config{
		MaxLiveKernels: 16,
		IdleTimeout:    30 * time.Minute,
		// Long enough never to fire on its own: tests reap with reapIdle.
		ReapInterval:  time.Hour,
		Starter:       h.start,
		Now:           h.clock.Now,
		Telemetry:     bus,
		StopTimeout:   askTimeout,
		StatusTimeout: askTimeout,
	}
	for _, f := range tune {
		f(&cfg)
	}
	h.reg = sys.Root.Spawn(Props(cfg))
	t.Cleanup(h.close)
	return h
}

// close stops the registry, every fake worker and owner, then the system.
func (h *harness) close() {
	_ = h.sys.Root.StopFuture(h.reg).Wait()
	h.mu.Lock()
	pids := slices.Collect(func(yield func(*actor.PID) bool) {
		for _, p := range h.fakes {
			if !yield(p) {
				return
			}
		}
	})
	pids = append(pids, h.owners...)
	h.mu.Unlock()
	for _, p := range pids {
		_ = h.sys.Root.StopFuture(p).Wait()
	}
	h.sys.Shutdown()
}

// start is the registry's Starter: it spawns a fake worker, after
// waiting for the gate a test set, if any.
func (h *harness) start(ctx context.Context, key Key, gen uint64, _ WorkerOptions) (kernelworker.Handle, error) {
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		gate(ctx, key, gen)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failNext > 0 {
		h.failNext--
		return kernelworker.Handle{}, errors.New("boot failed")
	}
	h.starts++
	w := &fakeWorker{key: key, gen: gen, logStop: func(reason string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.stops[gen] = append(h.stops[gen], reason)
	}}
	if h.onStart != nil {
		h.onStart(gen, w)
	}
	pid := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return w }))
	h.fakes[gen] = pid
	return kernelworker.Handle{PID: pid}, nil
}

func (h *harness) startCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts
}

func (h *harness) failNextStart() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failNext++
}

func (h *harness) worker(gen uint64) *actor.PID {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	pid, ok := h.fakes[gen]
	require.True(h.t, ok, "no worker of generation %d", gen)
	return pid
}

// ask sends the registry a request and returns its answer.
func ask[T any](h *harness, msg any) T {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.reg, msg, askTimeout).Result()
	require.NoError(h.t, err)
	v, ok := res.(T)
	require.True(h.t, ok, "answer %T", res)
	return v
}

// key is a real canonical key for scope: the harness's temp dir and
// this test binary (never run).
func (h *harness) key(scope string) Key {
	h.t.Helper()
	h.mu.Lock()
	if h.dir == "" {
		h.dir = h.t.TempDir()
	}
	dir := h.dir
	h.mu.Unlock()
	exe, err := os.Executable()
	require.NoError(h.t, err)
	k, err := NewKey(scope, "main", dir, exe, []string{"read"})
	require.NoError(h.t, err)
	return k
}

// newOwner spawns a session owner actor.
func (h *harness) newOwner() *actor.PID {
	pid := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return idleActor{} }))
	h.mu.Lock()
	h.owners = append(h.owners, pid)
	h.mu.Unlock()
	return pid
}

// kill stops an actor and waits until it is gone.
func (h *harness) kill(pid *actor.PID) {
	require.NoError(h.t, h.sys.Root.StopFuture(pid).Wait())
}

type idleActor struct{}

func (idleActor) Receive(actor.Context) {}

type acquireOpt func(*acquireMsg)

func withMax(n int) acquireOpt                { return func(a *acquireMsg) { a.MaxLiveKernels = n } }
func withIdle(d time.Duration) acquireOpt     { return func(a *acquireMsg) { a.IdleTimeout = d } }
func withCaller(c context.Context) acquireOpt { return func(a *acquireMsg) { a.Caller = c } }

func (h *harness) acquire(k Key, owner *actor.PID, opts ...acquireOpt) *acquireReply {
	h.t.Helper()
	m := &acquireMsg{Key: k, Owner: owner, Caller: context.Background()}
	for _, o := range opts {
		o(m)
	}
	return ask[*acquireReply](h, m)
}

// mustAcquire acquires and requires success.
func (h *harness) mustAcquire(k Key, owner *actor.PID, opts ...acquireOpt) Allocation {
	h.t.Helper()
	r := h.acquire(k, owner, opts...)
	require.NoError(h.t, r.Err)
	return r.Allocation
}

func (h *harness) release(l Lease) error {
	h.t.Helper()
	return ask[*releaseReply](h, &releaseMsg{Lease: l}).Err
}

func (h *harness) reset(k Key, owner *actor.PID) *resetReply {
	h.t.Helper()
	return ask[*resetReply](h, &resetMsg{Key: k, Owner: owner})
}

func (h *harness) detach(owner *actor.PID) {
	h.t.Helper()
	ask[*detachReply](h, &detachMsg{Owner: owner})
}

func (h *harness) snapshot() *Snapshot {
	h.t.Helper()
	return ask[*Snapshot](h, &SnapshotRequest{})
}

// sync waits until the registry has handled everything sent before.
func (h *harness) sync() { h.snapshot() }

// reapOnce runs one reaper pass.
func (h *harness) reapOnce() {
	h.sys.Root.Send(h.reg, reapIdle{})
	h.sync()
}

// eventually waits for cond, checked against the registry's answers.
func (h *harness) eventually(cond func() bool, what string) {
	h.t.Helper()
	require.Eventually(h.t, cond, eventuallyWait, eventuallyTick, what)
}

// events returns the recorded telemetry events of type T.
func events[T telemetry.Event](h *harness) []T {
	var out []T
	for _, e := range h.rec.Events() {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// alive reports whether the actor still exists.
func (h *harness) alive(pid *actor.PID) bool {
	_, ok := h.sys.ProcessRegistry.Get(pid)
	return ok
}

// --- fake worker -----------------------------------------------------

// fakeWorker answers StatusRequest and Stop like a kernel worker, and
// runs Execute cells FIFO without any process: the test finishes the
// active cell. A cell whose Ctx ends leaves the queue, or, when active,
// discards the kernel (the worker stops), as the real worker does.
type fakeWorker struct {
	key any
	gen uint64

	// phase overrides the phase derived from the cells ("" = derived).
	phase kernelworker.Phase
	// status shapes the status answer: "" valid, or one of the broken
	// answers of statusBreakers.
	status string
	// ignoreStop makes Stop do nothing; wedge makes the worker block in
	// its Receive on Stop until the channel is closed.
	ignoreStop bool
	wedge      chan struct{}

	queue     []*fakeCell
	active    *fakeCell
	nextCell  int
	completed int
	logStop   func(reason string)
}

type fakeCell struct {
	id   string
	ex   *kernelworker.Execute
	stop func() bool
}

// Control messages from tests; they run inside the fake actor.
type (
	fakeDo        struct{ fn func(*fakeWorker) }
	fakeFinish    struct{}
	fakeDie       struct{}
	fakeCellEnded struct{ c *fakeCell }
)

var statusBreakers = map[string]func(w *fakeWorker, st *kernelworker.Status) any{
	"garbage":      func(*fakeWorker, *kernelworker.Status) any { return "not a status" },
	"wrong_gen":    func(w *fakeWorker, st *kernelworker.Status) any { st.Generation = w.gen + 100; return st },
	"wrong_key":    func(w *fakeWorker, st *kernelworker.Status) any { st.Key = Key{ScopeID: "other"}; return st },
	"process_dead": func(w *fakeWorker, st *kernelworker.Status) any { st.ProcessAlive = false; return st },
	"idle_active": func(w *fakeWorker, st *kernelworker.Status) any {
		st.Phase, st.ActiveRequestID = "idle", "c9"
		return st
	},
	"running_no_id": func(w *fakeWorker, st *kernelworker.Status) any {
		st.Phase, st.ActiveRequestID = "running", ""
		return st
	},
	"unknown_phase":  func(w *fakeWorker, st *kernelworker.Status) any { st.Phase = "dreaming"; return st },
	"negative_queue": func(w *fakeWorker, st *kernelworker.Status) any { st.QueueDepth = -1; return st },
}

func (w *fakeWorker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *kernelworker.StatusRequest:
		if w.status == "silent" {
			return
		}
		st := &kernelworker.Status{
			Phase: w.currentPhase(), Generation: w.gen, Key: w.key,
			QueueDepth: len(w.queue), CellsCompleted: w.completed, ProcessAlive: true,
		}
		if w.active != nil {
			st.ActiveRequestID = w.active.id
		}
		if b, ok := statusBreakers[w.status]; ok {
			ctx.Respond(b(w, st))
			return
		}
		ctx.Respond(st)
	case *kernelworker.Stop:
		w.logStop(m.Reason)
		if w.wedge != nil {
			<-w.wedge
		}
		if w.ignoreStop {
			return
		}
		if w.active != nil {
			w.reply(w.active, kernelworker.CellResult{Reason: "interrupted", KilledBy: m.Reason})
			w.active = nil
		}
		w.failQueue("shutting_down")
		ctx.Stop(ctx.Self())
	case *kernelworker.Execute:
		w.nextCell++
		c := &fakeCell{id: fmt.Sprintf("c%d", w.nextCell), ex: m}
		self, root := ctx.Self(), ctx.ActorSystem().Root
		c.stop = context.AfterFunc(m.Ctx, func() { root.Send(self, fakeCellEnded{c: c}) })
		w.queue = append(w.queue, c)
		w.dispatch()
	case fakeCellEnded:
		if w.active == m.c {
			// Caller death of the active cell: the kernel is discarded.
			w.reply(w.active, kernelworker.CellResult{Reason: "interrupted", KilledBy: "cancelled"})
			w.active = nil
			w.failQueue("kernel_discarded")
			ctx.Stop(ctx.Self())
			return
		}
		if i := slices.Index(w.queue, m.c); i >= 0 {
			w.queue = slices.Delete(w.queue, i, i+1)
			w.reply(m.c, kernelworker.CellResult{Reason: "interrupted", KilledBy: "cancelled"})
		}
	case fakeFinish:
		if w.active != nil {
			w.completed++
			w.reply(w.active, kernelworker.CellResult{StateRetained: true, CellsCompleted: w.completed})
			w.active = nil
			w.dispatch()
		}
		ctx.Respond(true)
	case fakeDie:
		ctx.Stop(ctx.Self())
	case fakeDo:
		m.fn(w)
		ctx.Respond(true)
	}
}

func (w *fakeWorker) currentPhase() kernelworker.Phase {
	switch {
	case w.phase != "":
		return w.phase
	case w.active != nil:
		return phaseRunning
	}
	return phaseIdle
}

func (w *fakeWorker) dispatch() {
	if w.active == nil && len(w.queue) > 0 {
		w.active, w.queue = w.queue[0], w.queue[1:]
	}
}

func (w *fakeWorker) failQueue(reason string) {
	for _, c := range w.queue {
		w.reply(c, kernelworker.CellResult{Reason: reason})
	}
	w.queue = nil
}

func (w *fakeWorker) reply(c *fakeCell, res kernelworker.CellResult) {
	c.stop()
	res.RequestID = c.id
	c.ex.Reply <- res
}

// do runs fn inside the fake worker of generation gen.
func (h *harness) do(gen uint64, fn func(*fakeWorker)) {
	h.t.Helper()
	_, err := h.sys.Root.RequestFuture(h.worker(gen), fakeDo{fn: fn}, askTimeout).Result()
	require.NoError(h.t, err)
}

// stopsOf returns the Stop reasons worker gen has received so far.
func (h *harness) stopsOf(gen uint64) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.stops[gen]...)
}

// finish completes the active cell of worker gen.
func (h *harness) finish(gen uint64) {
	h.t.Helper()
	_, err := h.sys.Root.RequestFuture(h.worker(gen), fakeFinish{}, askTimeout).Result()
	require.NoError(h.t, err)
}

// execute submits a cell on alloc, with the lease's context as the cell's
// context (as the facade does), and returns the reply channel.
func (h *harness) execute(alloc Allocation) <-chan kernelworker.CellResult {
	return alloc.Worker.Execute(alloc.Lease.Context(), kernelworker.Cell{Code: "x = 1"})
}

// waitGone waits until the actor has stopped.
func (h *harness) waitGone(pid *actor.PID) {
	h.t.Helper()
	h.eventually(func() bool { return !h.alive(pid) }, "actor still alive")
}

// waitStops waits until worker gen has received exactly the Stop reasons
// want.
func (h *harness) waitStops(gen uint64, want ...string) {
	h.t.Helper()
	h.eventually(func() bool { return slices.Equal(h.stopsOf(gen), want) },
		fmt.Sprintf("worker %d should receive Stop %v", gen, want))
}

// recv takes one cell result, failing a broken test instead of hanging.
func (h *harness) recv(ch <-chan kernelworker.CellResult) kernelworker.CellResult {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(askTimeout):
		require.FailNow(h.t, "no cell result")
		return kernelworker.CellResult{}
	}
}
