package placement

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/registry"
)

// These tests hold the session side and a kernel node's kernelhost in one
// actor system, so the protocol is exercised without a network; the
// kernels are the test's own (kernelhost's Host is the runtime's session
// machinery, tested with real processes where the runtime wires it). A
// cell's code is a tiny script: "call TOOL" makes a helper call through
// the gate and prints its answer, "notify MSG" sends a notify(), "hang"
// waits for the cell's end, "crash" ends it losing the state.

type testHost struct {
	mu      sync.Mutex
	started []string
	stopped []string
	fail    error
}

func (h *testHost) StartKernel(_ context.Context, inc string, _ *wire.StartKernel) (kernelhost.Kernel, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return nil, h.fail
	}
	h.started = append(h.started, inc)
	return &testKernel{host: h, inc: inc}, nil
}

func (h *testHost) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.started), len(h.stopped)
}

type testKernel struct {
	host  *testHost
	inc   string
	cells int
}

func (k *testKernel) Run(ctx context.Context, cell *wire.RunCell, gate kernelhost.Gate, notify func(string)) *wire.CellResult {
	k.cells++
	var out strings.Builder
	for _, line := range strings.Split(cell.Code, "\n") {
		verb, arg, _ := strings.Cut(line, " ")
		switch verb {
		case "call":
			a := gate.Run(ctx, &wire.ToolCall{ID: int64(k.cells), Tool: arg, Params: map[string]any{"path": "x"}})
			fmt.Fprintf(&out, "%s ok=%v %s\n", arg, a.OK, a.Text)
		case "notify":
			notify(arg)
		case "hang":
			<-ctx.Done()
			return &wire.CellResult{Reason: kernelworker.ReasonKernelDiscarded, KilledBy: "cancelled", RequestID: "r"}
		case "crash":
			return &wire.CellResult{Reason: kernelworker.ReasonPortExit, RequestID: "r", Output: out.String()}
		}
	}
	fmt.Fprintf(&out, "cell %d", k.cells)
	return &wire.CellResult{RequestID: "r", Output: out.String(), StateRetained: true}
}

func (k *testKernel) Stop(context.Context) {
	k.host.mu.Lock()
	defer k.host.mu.Unlock()
	k.host.stopped = append(k.host.stopped, k.inc)
}

// echoGate answers every call with its tool's name, refusing "denied".
type echoGate struct{}

func (echoGate) Run(_ context.Context, c *wire.ToolCall) *wire.ToolAnswer {
	if c.Tool == "denied" {
		return &wire.ToolAnswer{Text: "tool 'denied' denied by policy", Blocked: true}
	}
	return &wire.ToolAnswer{OK: true, Text: "answer-of-" + c.Tool}
}

type harness struct {
	sys     *actor.ActorSystem
	cluster *Cluster
	host    *testHost
	node    *actor.PID
	starter registry.Starter
	key     registry.Key
}

func newHarness(t *testing.T, capacity, local int) *harness {
	t.Helper()
	host := &testHost{}
	h := newHarnessWith(t, capacity, local, host)
	h.host = host
	return h
}

// newHarnessWith is newHarness with a node whose kernels host runs.
func newHarnessWith(t *testing.T, capacity, local int, host kernelhost.Host) *harness {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	// The one remote of this process gives its actors host:port
	// addresses; every message here stays in the process.
	rem := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	rem.Start()
	c, err := Start(sys, Config{LocalCapacity: local, StartTimeout: 5 * time.Second, StopTimeout: time.Second})
	require.NoError(t, err)
	h := &harness{sys: sys, cluster: c}
	h.node, _, err = kernelhost.Start(sys, kernelhost.Config{Host: host, Directory: c.directory, Capacity: capacity, HelloInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	h.starter = c.Starter(sys.Root, func(context.Context, registry.Key, uint64, registry.WorkerOptions) (kernelworker.Handle, error) {
		return kernelworker.Handle{}, fmt.Errorf("no local kernels in this test")
	})
	h.key, err = registry.NewKey("s", "a", t.TempDir(), "/usr/bin/python3", nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		sys.Root.StopFuture(h.node).Wait()
		sys.Root.StopFuture(c.directory).Wait()
		rem.Shutdown(true)
		sys.Shutdown()
	})
	require.Eventually(t, func() bool { return h.nodes(t)[0].Capacity == capacity }, 5*time.Second, 10*time.Millisecond)
	return h
}

func (h *harness) nodes(t *testing.T) []NodeStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns, err := h.cluster.Nodes(ctx)
	require.NoError(t, err)
	if len(ns) == 0 {
		return []NodeStatus{{}}
	}
	return ns
}

func (h *harness) start(t *testing.T) *actor.PID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hd, err := h.starter(ctx, h.key, 1, registry.WorkerOptions{HelperSource: "x"})
	require.NoError(t, err)
	require.True(t, hd.Remote)
	return hd.PID
}

func (h *harness) run(t *testing.T, proxy *actor.PID, code string, notify func(string)) *wire.CellResult {
	t.Helper()
	ch := Execute(context.Background(), h.sys.Root, proxy, Cell{Run: wire.RunCell{Code: code, TimeoutMS: 1000}, Gate: echoGate{}, Notify: notify})
	select {
	case res := <-ch:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("no cell result")
		return nil
	}
}

func TestACellRunsOnTheNodeAndItsHelperCallsRunOnTheSessionSide(t *testing.T) {
	h := newHarness(t, 2, 0)
	proxy := h.start(t)
	var notes []string
	res := h.run(t, proxy, "notify half way\ncall read\ncall denied", func(m string) { notes = append(notes, m) })
	assert.Equal(t, "read ok=true answer-of-read\ndenied ok=false tool 'denied' denied by policy\ncell 1", res.Output)
	assert.True(t, res.StateRetained)
	assert.Equal(t, []string{"half way"}, notes)
	// The kernel keeps its state between cells.
	assert.Equal(t, "cell 2", h.run(t, proxy, "", nil).Output)
	assert.Equal(t, 1, h.nodes(t)[0].Kernels)

	st, err := h.sys.Root.RequestFuture(proxy, &kernelworker.StatusRequest{}, time.Second).Result()
	require.NoError(t, err)
	assert.Equal(t, kernelworker.PhaseIdle, st.(*kernelworker.Status).Phase)
	assert.Equal(t, 2, st.(*kernelworker.Status).CellsCompleted)
}

func TestAKernelThatLostItsStateEndsOnBothSides(t *testing.T) {
	h := newHarness(t, 2, 0)
	proxy := h.start(t)
	res := h.run(t, proxy, "crash", nil)
	assert.False(t, res.StateRetained)
	require.Eventually(t, func() bool { _, stopped := h.host.counts(); return stopped == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return h.nodes(t)[0].Kernels == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestStoppingTheProxyEndsTheNodesKernel(t *testing.T) {
	h := newHarness(t, 2, 0)
	proxy := h.start(t)
	h.sys.Root.Send(proxy, &kernelworker.Stop{Reason: "shutdown"})
	require.Eventually(t, func() bool { _, stopped := h.host.counts(); return stopped == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestACancelledCellIsCancelledOnTheNode(t *testing.T) {
	h := newHarness(t, 2, 0)
	proxy := h.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := Execute(ctx, h.sys.Root, proxy, Cell{Run: wire.RunCell{Code: "hang", TimeoutMS: 60000}, Gate: echoGate{}})
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case res := <-ch:
		assert.Equal(t, "cancelled", res.KilledBy, "%+v", res)
		assert.False(t, res.StateRetained)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled cell was not answered")
	}
}

func TestANodeThatStopsFailsItsCellsAndIsForgotten(t *testing.T) {
	h := newHarness(t, 2, 0)
	proxy := h.start(t)
	ch := Execute(context.Background(), h.sys.Root, proxy, Cell{Run: wire.RunCell{Code: "hang", TimeoutMS: 60000}, Gate: echoGate{}})
	queued := Execute(context.Background(), h.sys.Root, proxy, Cell{Run: wire.RunCell{Code: "", TimeoutMS: 60000}, Gate: echoGate{}})
	time.Sleep(50 * time.Millisecond)
	h.sys.Root.StopFuture(h.node).Wait()
	for _, c := range []<-chan *wire.CellResult{ch, queued} {
		select {
		case res := <-c:
			assert.False(t, res.StateRetained)
			assert.Equal(t, kernelworker.ReasonKernelDiscarded, res.Reason)
		case <-time.After(10 * time.Second):
			t.Fatal("a cell of the stopped node was not answered")
		}
	}
	require.Eventually(t, func() bool { return h.nodes(t)[0].Capacity == 0 }, 5*time.Second, 10*time.Millisecond)
	_, err := h.starter(context.Background(), h.key, 2, registry.WorkerOptions{})
	require.ErrorIs(t, err, ErrNoNode)
}

func TestPlacementFillsTheLeastLoadedAndRefusesWhenFull(t *testing.T) {
	d := &directory{localCapacity: 1, nodes: map[string]*node{
		"10.0.0.1:1": {capacity: 2}, "10.0.0.2:1": {capacity: 4},
	}, placed: map[string]string{}}
	var got []string
	for range 7 {
		p := d.place(nil)
		require.True(t, p.ok)
		got = append(got, p.address)
	}
	// Shares in use decide; ties go to the most free, then the address.
	assert.Equal(t, []string{"10.0.0.2:1", "10.0.0.1:1", "", "10.0.0.2:1", "10.0.0.2:1", "10.0.0.1:1", "10.0.0.2:1"}, got)
	assert.False(t, d.place(nil).ok, "every node is full")
	d.release("10.0.0.1:1")
	assert.Equal(t, "10.0.0.1:1", d.place(nil).address)
}

func TestTheNodeRefusesWhatItMustNot(t *testing.T) {
	h := newHarness(t, 1, 0)
	proxy := h.start(t)
	probe := newProbe(h.sys)
	defer h.sys.Root.Stop(probe.pid)

	// An unknown kind, a StartKernel beyond capacity, a kernel message
	// with a stale incarnation: each is refused, and the live kernel keeps
	// serving.
	probe.send(t, h.node, &wire.Envelope{Kind: "kernel.exec", Incarnation: "k1", Payload: []byte(`{}`)})
	assert.Contains(t, probe.refusal(t), "unknown message kind")
	env, err := wire.Encode(&wire.StartKernel{Key: "k", Owner: wire.PID{Address: "127.0.0.1:1", ID: "o"}}, "other", 0)
	require.NoError(t, err)
	probe.send(t, h.node, env)
	assert.Contains(t, probe.refusal(t), kernelhost.ErrNoCapacity.Error())

	kernel := actor.NewPID(h.node.Address, kernelhost.Name+"/kernel-"+h.host.started[0])
	env, err = wire.Encode(&wire.StopKernel{Reason: "x"}, "stale-incarnation", 0)
	require.NoError(t, err)
	probe.send(t, kernel, env)
	assert.Contains(t, probe.refusal(t), "no kernel of that incarnation")

	assert.Equal(t, "cell 1", h.run(t, proxy, "", nil).Output)
	_, stopped := h.host.counts()
	assert.Zero(t, stopped)
}

// probe is an actor that keeps the Refused answers it gets.
type probe struct {
	pid  *actor.PID
	root *actor.RootContext
	got  chan string
}

func newProbe(sys *actor.ActorSystem) *probe {
	p := &probe{root: sys.Root, got: make(chan string, 8)}
	p.pid = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if env, ok := ctx.Message().(*wire.Envelope); ok {
			if v, err := wire.Decode(env); err == nil {
				if r, ok := v.(*wire.Refused); ok {
					p.got <- r.Reason
				}
			}
		}
	}))
	return p
}

func (p *probe) send(t *testing.T, to *actor.PID, env *wire.Envelope) {
	t.Helper()
	p.root.RequestWithCustomSender(to, env, p.pid)
}

func (p *probe) refusal(t *testing.T) string {
	t.Helper()
	select {
	case r := <-p.got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no refusal")
		return ""
	}
}

// countGate counts the calls it runs.
type countGate struct{ n atomic.Int32 }

func (g *countGate) Run(context.Context, *wire.ToolCall) *wire.ToolAnswer {
	g.n.Add(1)
	return &wire.ToolAnswer{OK: true, Text: "ran"}
}

// A node is not trusted by the bridge of its cell: notify() floods are
// bounded as a local pump bounds them, and only the cell's own kernel
// gets its calls run.
func TestTheBridgeKeepsItsBoundsWhateverTheNodeSends(t *testing.T) {
	h := newHarness(t, 1, 0)
	kernel := newProbe(h.sys)
	defer h.sys.Root.Stop(kernel.pid)
	stranger := newProbe(h.sys)
	defer h.sys.Root.Stop(stranger.pid)
	var mu sync.Mutex
	var notes []string
	gate := &countGate{}
	b := &bridge{gate: gate, kernel: kernel.pid, incarnation: "k1", log: h.cluster.cfg.Logger,
		notify: func(m string) { mu.Lock(); notes = append(notes, m); mu.Unlock() }}
	pid := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return b }))
	defer func() { _ = h.sys.Root.StopFuture(pid).Wait() }()

	big := strings.Repeat("é", 5000)
	for range 100 {
		env, err := wire.Encode(&wire.Notify{Message: big}, "k1", 1)
		require.NoError(t, err)
		kernel.send(t, pid, env)
	}
	call, err := wire.Encode(&wire.ToolCall{ID: 1, Tool: "read"}, "k1", 1)
	require.NoError(t, err)
	stranger.send(t, pid, call)
	kernel.send(t, pid, call)
	require.Eventually(t, func() bool { return gate.n.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int32(1), gate.n.Load(), "the stranger's call never ran")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, notes, maxNotifyForwarded)
	for _, n := range notes {
		assert.LessOrEqual(t, len(n), maxNotifyBytes)
		assert.True(t, utf8.ValidString(n))
	}
}

// A start whose caller stopped waiting for its place counts no kernel on
// any node, whether the directory's answer came first or not.
func TestAnAbandonedPlacementCountsNoKernel(t *testing.T) {
	h := newHarness(t, 2, 0)
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		pl, err := h.cluster.place(ctx, nil)
		if err == nil {
			// The answer won the race with the cancel: the start gives
			// the place back itself, as the starter does on failure.
			h.cluster.root.Send(h.cluster.directory, unplaceMsg{address: pl.address})
			continue
		}
		require.ErrorIs(t, err, context.Canceled)
	}
	assert.Zero(t, h.nodes(t)[0].Kernels)
	pl, err := h.cluster.place(context.Background(), nil)
	require.NoError(t, err, "the node's capacity is all there")
	assert.Equal(t, 1, h.nodes(t)[0].Kernels)
	h.cluster.root.Send(h.cluster.directory, unplaceMsg{address: pl.address})
}
