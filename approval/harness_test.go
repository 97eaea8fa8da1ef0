package approval

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/executecode/executecode/telemetry"
)

// waitLimit only keeps a broken test from hanging; no test asserts a time.
const waitLimit = 10 * time.Second

// harness runs one broker actor in its own actor system.
type harness struct {
	t     *testing.T
	sys   *actor.ActorSystem
	pid   *actor.PID
	b     *Broker
	rec   *telemetry.Recorder
	steps chan watchStep
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	// Registered first, so it runs after every other cleanup.
	t.Cleanup(func() { goleak.VerifyNone(t) })
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		// A dead letter (an answer to a stopped watcher) starts the
		// throttle's goroutine for one interval; keep it short.
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	h := &harness{t: t, sys: sys, rec: &telemetry.Recorder{}, steps: make(chan watchStep, 1024)}
	bus := &telemetry.Bus{}
	bus.Subscribe(h.rec)
	cfg.Telemetry = bus
	cfg.watchHook = func(s watchStep) { h.steps <- s }
	h.pid = sys.Root.Spawn(Props(cfg))
	h.b = NewBroker(sys.Root, h.pid)
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	_ = h.sys.Root.StopFuture(h.pid).Wait()
	h.sys.Shutdown()
}

// stopBroker stops the broker actor and waits until it is gone.
func (h *harness) stopBroker() {
	require.NoError(h.t, h.sys.Root.StopFuture(h.pid).Wait())
}

type result struct {
	out Outcome
	err error
}

// request runs Broker.Request on its own goroutine (a dispatch waiting on
// its prompt).
func (h *harness) request(ctx context.Context, req Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		out, err := h.b.Request(ctx, req)
		ch <- result{out, err}
	}()
	return ch
}

// outcome waits for a request's result.
func (h *harness) outcome(ch <-chan result) result {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLimit):
		require.FailNow(h.t, "request did not return")
		return result{}
	}
}

func (h *harness) waitPending(n int) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.b.Pending() == n }, waitLimit, time.Millisecond,
		"want %d pending prompts", n)
}

// step waits for the next watcher step.
func (h *harness) step() watchStep {
	h.t.Helper()
	select {
	case s := <-h.steps:
		return s
	case <-time.After(waitLimit):
		require.FailNow(h.t, "no watcher step")
		return watchStep{}
	}
}

func (h *harness) requested() int {
	n := 0
	for _, e := range h.rec.Events() {
		if _, ok := e.(telemetry.ApprovalRequested); ok {
			n++
		}
	}
	return n
}

// decisions lists the decisions of the resolved events so far.
func (h *harness) decisions() []telemetry.ApprovalDecision {
	var out []telemetry.ApprovalDecision
	for _, e := range h.rec.Events() {
		if r, ok := e.(telemetry.ApprovalResolved); ok {
			out = append(out, r.Decision)
		}
	}
	return out
}

// probe reports whether a call is prompted (no stored approval answers
// it), by the requested events it causes, and else the scope of the
// stored approval that answered. A prompt it causes is cancelled at once
// through the request's context.
func (h *harness) probe(req Request) (prompted bool, stored Decision) {
	h.t.Helper()
	before := h.requested()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := h.request(ctx, req)
	var r result
	returned := false
	require.Eventually(h.t, func() bool {
		select {
		case r = <-ch:
			returned = true
			return true
		default:
			return h.requested() > before
		}
	}, waitLimit, time.Millisecond)
	if !returned {
		cancel()
		r = h.outcome(ch)
	}
	require.NoError(h.t, r.err)
	if h.requested() > before {
		return true, ""
	}
	require.True(h.t, r.out.Approved, "a call answered without a prompt is approved")
	return false, r.out.Scope
}

// prompts reports whether a call is prompted.
func (h *harness) prompts(req Request) bool {
	h.t.Helper()
	prompted, _ := h.probe(req)
	return prompted
}

// hostPrompt is an Approver like a host's interactive prompt: it shows
// each request (asked) and waits for the host to answer through Resolve,
// returning when its context ends.
type hostPrompt struct {
	asked chan Request
	mu    sync.Mutex
	ended int // calls that saw their context end
}

func newHostPrompt() *hostPrompt { return &hostPrompt{asked: make(chan Request, 1024)} }

func (p *hostPrompt) Decide(ctx context.Context, req Request) (Decision, error) {
	p.asked <- req
	<-ctx.Done()
	p.mu.Lock()
	p.ended++
	p.mu.Unlock()
	return "", ctx.Err()
}

func (p *hostPrompt) endedCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *hostPrompt) next(t *testing.T) Request {
	t.Helper()
	select {
	case r := <-p.asked:
		return r
	case <-time.After(waitLimit):
		require.FailNow(t, "the approver was not asked")
		return Request{}
	}
}

func webfetch(id, url, session, agent string) Request {
	return Request{ID: id, Tool: "webfetch", Args: map[string]any{"url": url}, SessionID: session, AgentID: agent,
		Rationale: "Tool execution: webfetch"}
}
