package pump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/tools"
)

// guardFor is a GuardedGate around the local gate of ts, with budgets
// roomy enough that a test only meets the one it is about.
func guardFor(t *testing.T, edit func(*Config), ts ...tools.Tool) *GuardedGate {
	t.Helper()
	m := map[string]tools.Tool{}
	for _, tl := range ts {
		m[tl.Name()] = tl
	}
	cfg := Config{Tools: m, MaxCalls: 100, MaxResultBytes: 1 << 20}
	if edit != nil {
		edit(&cfg)
	}
	return NewGuardedGate(cfg)
}

func TestGuardNeverRunsAnAnsweredIDAgain(t *testing.T) {
	read := echoTool("read")
	g := guardFor(t, nil, read)
	ctx := context.Background()
	assert.Equal(t, Answer{OK: true, Text: "first"}, g.Run(ctx, Call{ID: 1, Tool: "read", Params: map[string]any{"text": "first"}}))
	again := g.Run(ctx, Call{ID: 1, Tool: "read", Params: map[string]any{"text": "again"}})
	assert.Equal(t, Answer{Text: "rpc request already processed"}, again)
	assert.EqualValues(t, 1, read.runs.Load())
	st := g.Stats()
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors)
}

func TestGuardRefusesAnIDRepeatedWhileTheFirstRuns(t *testing.T) {
	b := newBlocker("read")
	g := guardFor(t, nil, b)
	ctx := context.Background()
	first := make(chan Answer, 1)
	go func() { first <- g.Run(ctx, Call{ID: 7, Tool: "read", Params: map[string]any{"id": 7.0}}) }()
	b.waitStart(t)
	assert.Equal(t, Answer{Text: "rpc request already processed"}, g.Run(ctx, Call{ID: 7, Tool: "read", Params: map[string]any{"id": 7.0}}))
	close(b.release)
	assert.Equal(t, Answer{OK: true, Text: "done 7"}, <-first)
	assert.EqualValues(t, 1, b.runs.Load())
}

func TestGuardRefusesWhatTheCellMayNotCallWithTheLocalTexts(t *testing.T) {
	read, grep := echoTool("read"), echoTool("grep")
	g := guardFor(t, func(c *Config) {
		c.Policy = tools.Policy{Deny: []string{"grep"}, Allow: []string{"read", "grep"}}
	}, read, grep)
	ctx := context.Background()
	assert.Equal(t, Answer{Text: "tool 'bash' is not available inside execute_code scripts"}, g.Run(ctx, Call{ID: 1, Tool: "bash"}))
	assert.Equal(t, Answer{Text: "Tool 'grep' is in deny list"}, g.Run(ctx, Call{ID: 2, Tool: "grep"}))
	assert.Zero(t, grep.runs.Load(), "a denied tool never runs")

	st := g.Stats()
	assert.Equal(t, 2, st.Calls, "each is charged, as at a local claim")
	assert.Equal(t, 1, st.Errors)
	assert.Equal(t, 1, st.Denied)
	calls, _ := g.Ledger()
	require.Len(t, calls, 2)
	assert.Equal(t, RoundTripError, calls[0].Outcome)
	assert.Equal(t, RoundTripDenied, calls[1].Outcome)
}

func TestGuardRefusesParamsNoLocalRequestCouldCarry(t *testing.T) {
	read := echoTool("read")
	g := guardFor(t, nil, read)
	ctx := context.Background()
	for name, params := range map[string]map[string]any{
		"one long string": {"text": strings.Repeat("x", maxRequestBytes)},
		"many keys":       manyKeys(maxRequestBytes / 8),
		"deep nesting":    deepList(maxJSONDepth + 1),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, Answer{Text: "rpc authentication failed"}, g.Run(ctx, Call{ID: 1, Tool: "read", Params: params}))
		})
	}
	assert.Zero(t, read.runs.Load())
	assert.Zero(t, g.Stats().Calls, "never charged, as a request too big to read is not")
	assert.Equal(t, Answer{OK: true, Text: "ok"}, g.Run(ctx, Call{ID: 1, Tool: "read"}), "nor remembered")
}

func manyKeys(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("k%07d", i)] = 1.0
	}
	return m
}

func deepList(depth int) map[string]any {
	var v any = "x"
	for range depth {
		v = []any{v}
	}
	return map[string]any{"text": v}
}

// The bound never refuses what a local pump reads: for request bodies as
// the shim writes them (python's json.dumps: ASCII escapes) and as other
// encoders might (raw UTF-8, short numbers), up to the read bound, the
// params decoded from them are within it.
func TestGuardsParamsBoundAdmitsEveryRequestTheLocalPumpReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "<", "\u00e9", "\U0001f600", "\u2028", "\x01", `"`, `\`}
	for i := range 200 {
		var text strings.Builder
		for text.Len() < rng.IntN(maxRequestBytes/2) {
			text.WriteString(pieces[rng.IntN(len(pieces))])
		}
		params := map[string]any{"text": text.String(), "n": 1e16, "list": []any{1.5, true, nil, "x"}}
		body, err := json.Marshal(map[string]any{"tool": "read", "params": params})
		require.NoError(t, err)
		if i%2 == 0 {
			body = []byte(asciiEscaped(string(body)))
		}
		if len(body) > maxRequestBytes {
			continue
		}
		req, err := parseRequest("token", "1", FrameMAC("token", KindRequest, "1", body), body)
		require.NoError(t, err)
		assert.False(t, paramsOver(req.Params, maxRequestBytes), "a body of %d bytes", len(body))
	}
}

// asciiEscaped is s with every non-ASCII character escaped as python's
// json.dumps writes it.
func asciiEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func TestGuardCountsTheCallBudgetAgain(t *testing.T) {
	read := echoTool("read")
	g := guardFor(t, func(c *Config) { c.MaxCalls = 3 }, read)
	ctx := context.Background()
	for id := int64(1); id <= 5; id++ {
		a := g.Run(ctx, Call{ID: id, Tool: "read"})
		if id <= 3 {
			assert.True(t, a.OK, "call %d", id)
		} else {
			assert.Equal(t, Answer{Text: "rpc call limit exceeded (max 3 calls per script)"}, a, "call %d", id)
		}
	}
	assert.EqualValues(t, 3, read.runs.Load())
	st := g.Stats()
	assert.Equal(t, 3, st.Calls)
	assert.Equal(t, 2, st.Errors)
	assert.Len(t, st.Seen, 3, "ids past the budget are not remembered")
}

func TestGuardSpendsTheResultByteBudgetAgain(t *testing.T) {
	g := guardFor(t, func(c *Config) { c.MaxResultBytes = 10 }, sizeTool("read", true))
	ctx := context.Background()
	assert.Equal(t, Answer{OK: true, Text: "xxxxxx", Untrusted: true}, g.Run(ctx, Call{ID: 1, Tool: "read", Params: map[string]any{"n": 6.0}}))
	over := g.Run(ctx, Call{ID: 2, Tool: "read", Params: map[string]any{"n": 6.0}})
	assert.Equal(t, Answer{Text: "rpc result byte budget exceeded (result 6 bytes, 4 bytes remaining of 10)"}, over,
		"an error, not untrusted: the script never saw the content")
	st := g.Stats()
	assert.EqualValues(t, 6, st.Bytes)
	assert.Equal(t, 1, st.Errors)
}

// Answers are settled in the order the calls were admitted, whatever
// order their tools finish in: the budget refuses the same call a local
// pump's claim-order settling refuses.
func TestGuardSettlesInAdmissionOrder(t *testing.T) {
	b := newBlocker("read")
	b.perID = map[int64]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	g := guardFor(t, func(c *Config) { c.MaxResultBytes = 10 }, b)
	ctx := context.Background()
	first, second := g.Admit(Call{ID: 1, Tool: "read", Params: map[string]any{"id": 1.0}}), g.Admit(Call{ID: 2, Tool: "read", Params: map[string]any{"id": 2.0}})
	answers := [2]chan Answer{make(chan Answer, 1), make(chan Answer, 1)}
	go func() { answers[0] <- first(ctx) }()
	go func() { answers[1] <- second(ctx) }()
	b.waitStart(t)
	b.waitStart(t)
	close(b.perID[2]) // the second finishes first, and waits for its turn
	select {
	case a := <-answers[1]:
		t.Fatalf("the second call settled before the first: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
	close(b.perID[1])
	assert.Equal(t, Answer{OK: true, Text: "done 1"}, <-answers[0])
	assert.Equal(t, Answer{Text: "rpc result byte budget exceeded (result 6 bytes, 4 bytes remaining of 10)"}, <-answers[1])
}

// A node says a gated call is not gated, and names an approval id of its
// choosing: the guard prompts anyway, under its own id.
func TestGuardGatesWhatThePolicyGatesWhateverTheNodeSays(t *testing.T) {
	ls, read := echoTool("ls"), echoTool("read")
	p := newPrompter(approval.Deny)
	g := guardFor(t, func(c *Config) {
		c.Policy = tools.Policy{RequireApproval: []string{"ls"}}
		c.Approvals = startBroker(t, p)
	}, ls, read)
	ctx := context.Background()

	forged := "appr_" + strings.Repeat("0", 32)
	a := g.Run(ctx, Call{ID: 1, Tool: "ls", ApprovalID: forged, Gated: false})
	assert.Equal(t, Answer{Blocked: true, Text: "approval denied for 'ls'"}, a)
	asked := p.next(t)
	assert.NotEqual(t, forged, asked.ID)
	assert.True(t, strings.HasPrefix(asked.ID, "appr_"))
	assert.Zero(t, ls.runs.Load())

	// Gated=true for a tool the policy does not gate prompts nobody.
	assert.True(t, g.Run(ctx, Call{ID: 2, Tool: "read", Gated: true}).OK)
	assert.EqualValues(t, 1, p.count.Load())

	calls, _ := g.Ledger()
	require.Len(t, calls, 2)
	assert.Equal(t, asked.ID, calls[0].ApprovalID)
	assert.True(t, calls[0].Gated)
	assert.False(t, calls[1].Gated)
	assert.Equal(t, 1, g.Stats().Denied)
}

// A flood of calls, fresh ids and repeated ones, from many goroutines:
// no more tools run than the budget allows, never more at once than a
// local wave, and the guard's memory stays bounded.
func TestGuardWithstandsAFlood(t *testing.T) {
	var running, most atomic.Int64
	slow := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		return tools.TextResult("x"), nil
	}}
	g := guardFor(t, func(c *Config) { c.MaxCalls = 50; c.MaxParallel = 3 }, slow)
	ctx := context.Background()
	var wg sync.WaitGroup
	var oks, refused atomic.Int64
	for i := range 2000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := g.Run(ctx, Call{ID: int64(i % 700), Tool: "read"})
			if a.OK {
				oks.Add(1)
			} else {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 50, oks.Load())
	assert.EqualValues(t, 1950, refused.Load())
	assert.EqualValues(t, 50, slow.runs.Load())
	assert.LessOrEqual(t, most.Load(), int64(3))
	st := g.Stats()
	assert.Equal(t, 50, st.Calls)
	assert.Len(t, st.Seen, 50)
	calls, _ := g.Ledger()
	assert.Len(t, calls, 50)
	assert.Empty(t, g.Unanswered())
}

func TestGuardsLedgerIsBounded(t *testing.T) {
	g := guardFor(t, func(c *Config) { c.MaxCalls = 5000 }, echoTool("read"))
	ctx := context.Background()
	for id := int64(1); id <= maxGuardLedger+100; id++ {
		require.True(t, g.Run(ctx, Call{ID: id, Tool: "read"}).OK)
	}
	calls, dropped := g.Ledger()
	assert.Len(t, calls, maxGuardLedger)
	assert.Equal(t, 100, dropped)
	assert.EqualValues(t, 101, calls[0].ID, "the oldest are dropped")
	assert.EqualValues(t, maxGuardLedger+100, calls[len(calls)-1].ID)
}

// The calls a lost node leaves behind are the ones in flight: running,
// or waiting for a slot.
func TestGuardNamesTheCallsInFlight(t *testing.T) {
	b := newBlocker("read")
	g := guardFor(t, func(c *Config) { c.MaxParallel = 2 }, b)
	cell, endCell := context.WithCancel(context.Background())
	answers := make(chan Answer, 3)
	for _, id := range []int64{9, 4, 6} {
		run := g.Admit(Call{ID: id, Tool: "read", Params: map[string]any{"id": float64(id)}})
		go func() { answers <- run(cell) }()
	}
	b.waitStart(t)
	b.waitStart(t)
	unanswered := g.Unanswered()
	require.Len(t, unanswered, 3, "two running, one waiting for a slot")
	assert.Equal(t, []int64{4, 6, 9}, []int64{unanswered[0].ID, unanswered[1].ID, unanswered[2].ID})
	for _, c := range unanswered {
		assert.False(t, c.Answered)
		assert.Equal(t, "read", c.Tool)
	}

	endCell() // the node is gone: the cell's calls end
	for range 3 {
		a := <-answers
		assert.False(t, a.OK)
	}
	assert.Empty(t, g.Unanswered())
	assert.Equal(t, 3, g.Stats().Errors)
}

func TestGuardContainsPanicsOfTheInnerGateAndThePolicy(t *testing.T) {
	boom := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) { panic("boom") }}
	cfg := Config{Tools: map[string]tools.Tool{"read": boom}, MaxCalls: 10, MaxResultBytes: 10}.settled()
	g := newGuardedGate(panicGate{}, cfg)
	ctx := context.Background()
	assert.Equal(t, Answer{Text: "inner gate fell"}, g.Run(ctx, Call{ID: 1, Tool: "read"}))
	assert.Empty(t, g.Unanswered())
	assert.Equal(t, 1, g.Stats().Errors)

	h := guardFor(t, func(c *Config) { c.Policy = panicPolicy{} }, echoTool("read"))
	assert.Equal(t, Answer{Text: "rpc request failed"}, h.Run(ctx, Call{ID: 1, Tool: "read"}))
	st := h.Stats()
	assert.Zero(t, st.Calls, "no call charged, as at a local claim")
	assert.Equal(t, 1, st.Errors)
	assert.Equal(t, Answer{Text: "rpc request already processed"}, h.Run(ctx, Call{ID: 1, Tool: "read"}), "the id is remembered")
}

type panicGate struct{}

func (panicGate) Run(context.Context, Call) Answer { panic(errors.New("inner gate fell")) }

// Every text the guard returns is valid UTF-8, written as the script
// would read it from a local pump.
func TestGuardReturnsTextsAsTheScriptReadsThem(t *testing.T) {
	bad := &funcTool{name: "read", fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		if p["fail"] == true {
			return tools.Result{}, errors.New("no \xff\xfe")
		}
		return tools.TextResult("ok \xff\xfe"), nil
	}}
	g := guardFor(t, nil, bad)
	ctx := context.Background()
	assert.Equal(t, Answer{OK: true, Text: "ok \ufffd"}, g.Run(ctx, Call{ID: 1, Tool: "read"}))
	assert.Equal(t, Answer{Text: "no \ufffd\ufffd"}, g.Run(ctx, Call{ID: 2, Tool: "read", Params: map[string]any{"fail": true}}))
}

func TestAPumpWithAGateRefusesNamesItsGateDoesNotServe(t *testing.T) {
	var seen atomic.Int64
	h := newHarness(t)
	h.cfg.Tools = nil
	h.cfg.Gate = gateFunc(func(_ context.Context, c Call) Answer {
		seen.Add(1)
		return Answer{OK: true, Text: "ran " + c.Tool}
	})
	h.cfg.Available = []string{"read"}
	h.request(1, "read", nil)
	h.request(2, "ls", nil)
	h.sweep()
	assert.Equal(t, "ran read", h.mustResponse(1).Content)
	assert.Equal(t, "tool 'ls' is not available inside execute_code scripts", h.mustResponse(2).Error)
	assert.EqualValues(t, 1, seen.Load())
	assert.Equal(t, []string{"read"}, h.stats.SortedTools())
}

func TestStartServerRefusesAGateWithToolsAndAvailableWithoutAGate(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	cfg := h.cfg
	cfg.Gate = gateFunc(func(context.Context, Call) Answer { return Answer{} })
	_, err := StartServer(cfg)
	require.ErrorIs(t, err, errInvalidConfig)
	assert.ErrorContains(t, err, "Tools must be nil with a Gate")

	cfg = h.cfg
	cfg.Available = []string{"read"}
	_, err = StartServer(cfg)
	require.ErrorIs(t, err, errInvalidConfig)
	assert.ErrorContains(t, err, "Available is only read with a Gate")
}

// A Sender is handed each wave's calls from the sweep in claim order;
// a panic inside Send is the call's answer, as one inside Run is.
func TestASenderGetsEachWaveInClaimOrder(t *testing.T) {
	h := newHarness(t)
	h.cfg.Tools, h.cfg.MaxParallel = nil, 3
	s := &orderSender{}
	h.cfg.Gate, h.cfg.Available = s, []string{"read", "boom"}
	for _, id := range []int64{5, 2, 9, 4} {
		tool := "read"
		if id == 9 {
			tool = "boom"
		}
		h.request(id, tool, nil)
	}
	h.sweep()
	assert.Equal(t, []int64{2, 4, 5, 9}, s.order)
	assert.Equal(t, "sent 2", h.mustResponse(2).Content)
	assert.Equal(t, "rpc request failed", h.mustResponse(9).Error)
	assert.Zero(t, s.runs, "a Sender is never Run by the pump")
}

type gateFunc func(context.Context, Call) Answer

func (f gateFunc) Run(ctx context.Context, c Call) Answer { return f(ctx, c) }

type orderSender struct {
	mu    sync.Mutex
	order []int64
	runs  int
}

func (s *orderSender) Run(context.Context, Call) Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	return Answer{}
}

func (s *orderSender) Send(_ context.Context, c Call) <-chan Answer {
	s.mu.Lock()
	s.order = append(s.order, c.ID)
	s.mu.Unlock()
	if c.Tool == "boom" {
		var nilMap map[string]int
		nilMap["x"] = 1 // a runtime fault: answered without its words
	}
	ch := make(chan Answer, 1)
	ch <- Answer{OK: true, Text: fmt.Sprintf("sent %d", c.ID)}
	return ch
}
