package pump

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/executecode/executecode/approval"
)

// maxGuardLedger bounds the answered calls a GuardedGate's ledger keeps;
// the calls in flight are always kept (at most the bridge's bound on calls
// at once, docs/cluster.md).
const maxGuardLedger = 1024

// GuardedGate is the session side's gate for a remote cell
// (docs/cluster.md, Cell): a kernel node's pump claims the cell's helper
// calls and forwards each one here, and the guard decides it again before
// its inner gate (NewGate) runs it, believing nothing the node says but
// the call's id, tool and params. It keeps its own
//
//   - replay memory: an id it charged is never run again, whether the
//     repeat comes while the first runs or after its answer;
//   - call budget (MaxCalls) and result-byte budget (MaxResultBytes),
//     spent as a local pump spends them, on its own figures;
//   - policy: a tool outside Tools is not available, Policy's denial is
//     answered with its reason, and the calls Policy requires approval
//     for are gated whenever Approvals is set, under an approval id the
//     guard allocates, whatever the node's Gated and ApprovalID say;
//   - bound on params (the local pump never reads a request over 1 MiB);
//   - bound on tools running at once (MaxParallel, a local pump's wave):
//     the others wait for a slot;
//   - ledger of every call it charged, the calls in flight always
//     (Unanswered: what a lost node leaves behind).
//
// It settles answers (spends the result-byte budget on them) in the order
// it admitted the calls, as a local pump settles them in claim order: a
// caller that admits a wave's calls in claim order (Admit, from the cell
// bridge's mailbox, which a node's Sender fills in claim order) gets
// exactly a local pump's answers. Every answer it refuses with is the
// text a local pump gives for the same call, and every text it returns is
// valid UTF-8 as the script would see it.
type GuardedGate struct {
	inner Gate
	cfg   Config
	slots chan struct{}

	mu    sync.Mutex
	stats Stats
	// queue holds the admitted calls not yet settled, in admission
	// order: only its head may settle an answer.
	queue    []*guardTicket
	inFlight map[int64]*GuardedCall
	// answered is a ring of the last maxGuardLedger answered calls; next
	// is where the next one goes once it is full, dropped how many it
	// overwrote.
	answered []GuardedCall
	next     int
	dropped  int
}

// guardTicket is an admitted call's place in the settling order.
type guardTicket struct {
	call *GuardedCall
	// turn is closed when the ticket reaches the head of the queue.
	turn   chan struct{}
	headed bool
}

// GuardedCall is one call a GuardedGate charged, as its ledger keeps it.
type GuardedCall struct {
	ID   int64
	Tool string
	// ApprovalID and Gated are the guard's own: the id a prompt for the
	// call is asked under, and whether it is asked.
	ApprovalID string
	Gated      bool
	Admitted   time.Time
	// Answered is false while the call is in flight; Outcome is then
	// empty.
	Answered bool
	Outcome  RoundTripOutcome
}

// NewGuardedGate is the gate a local pump of the cell would have, built
// from cfg (NewGate), guarded with cfg's own figures: its Tools, Policy,
// Approvals (set: gated calls are gated), MaxCalls, MaxResultBytes,
// MaxParallel, OnRoundTrip and Logger. The directory, token and bells are
// the node's and are not read.
func NewGuardedGate(cfg Config) *GuardedGate {
	cfg.Gate, cfg.Available = nil, nil
	cfg = cfg.settled()
	return newGuardedGate(cfg.gate, cfg)
}

// newGuardedGate guards inner with cfg, settled: a test's own inner gate.
func newGuardedGate(inner Gate, cfg Config) *GuardedGate {
	return &GuardedGate{
		inner:    inner,
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.MaxParallel),
		stats:    newStats(),
		inFlight: map[int64]*GuardedCall{},
	}
}

// Run is Admit and its run at once: calls that come concurrently are
// settled in the order Run admitted them.
func (g *GuardedGate) Run(ctx context.Context, c Call) Answer {
	return g.Admit(c)(ctx)
}

// Admit decides c now, without waiting: the returned function gives a
// refusal's answer at once, or runs an admitted call through the inner
// gate (waiting for a slot among MaxParallel) and settles its answer
// after those of every call admitted before it. ctx is the cell's: when
// it ends, a call still waiting for a slot or its turn is answered
// interrupted. The function must be called exactly once.
func (g *GuardedGate) Admit(c Call) func(ctx context.Context) Answer {
	if paramsOver(c.Params, maxRequestBytes) {
		// What a local pump answers a request too big to read; nothing is
		// charged or remembered, as there.
		g.cfg.Logger.Warn().Int64("id", c.ID).Msg("execute_code cluster guard refused a call whose params are over the request bound")
		g.mu.Lock()
		g.stats.Denied++
		g.mu.Unlock()
		return answered(Answer{Text: msgAuthFailed})
	}
	t, refusal := g.admit(c)
	if t == nil {
		return answered(refusal)
	}
	params := c.Params
	if params == nil {
		params = map[string]any{} // a local claim always hands the tool a map
	}
	return func(ctx context.Context) Answer { return g.run(ctx, t, params) }
}

func answered(a Answer) func(context.Context) Answer {
	return func(context.Context) Answer { return a }
}

// run is an admitted call: a slot, the inner gate, its turn, the spend.
func (g *GuardedGate) run(ctx context.Context, t *guardTicket, params map[string]any) (out Answer) {
	call := t.call
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return g.finish(t, Answer{Text: msgInterrupted})
	}
	a, ran := Answer{}, false
	func() {
		defer func() { <-g.slots }()
		defer func() {
			// A panic, or a Goexit, of the inner gate: the call is still
			// answered in the ledger and the figures.
			if !ran {
				out = g.finish(t, panicAnswer(g.cfg.Logger, call.Tool, call.ID, recover()))
			}
		}()
		a = g.inner.Run(ctx, Call{ID: call.ID, Tool: call.Tool, Params: params, ApprovalID: call.ApprovalID, Gated: call.Gated})
		ran = true
	}()
	if !ran {
		return out
	}
	select {
	case <-t.turn:
	case <-ctx.Done():
		return g.finish(t, Answer{Text: msgInterrupted})
	}
	return g.finish(t, a)
}

// admit is the claim step of docs/protocol.md on the guard's own
// figures: replay, call budget, the charge, tool, policy and gating. A
// refused call is answered with the local pump's text; an admitted one
// joins the settling queue.
func (g *GuardedGate) admit(c Call) (ticket *guardTicket, refusal Answer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := &g.stats
	if st.seen(c.ID) {
		st.Errors++
		return nil, Answer{Text: msgReplayed}
	}
	if st.Calls >= g.cfg.MaxCalls {
		// Not remembered: no id past the budget can ever run, and a flood
		// of them must not grow the memory.
		st.Errors++
		return nil, Answer{Text: msgCallLimit(g.cfg.MaxCalls)}
	}
	calls, errs, denied := st.Calls, st.Errors, st.Denied
	st.remember(c.ID)
	st.Calls++
	call := &GuardedCall{ID: c.ID, Tool: c.Tool, Admitted: time.Now()}
	refused := func(a Answer, o RoundTripOutcome) (*guardTicket, Answer) {
		call.Answered, call.Outcome = true, o
		g.keep(*call)
		return nil, a
	}
	defer func() {
		if r := recover(); r != nil {
			// A panicking policy: answered "rpc request failed" with the id
			// remembered and no call charged, as at a local claim.
			g.cfg.Logger.Warn().Int64("id", c.ID).Str("panic", typeName(r)).
				Msg("execute_code rpc claim failed; answering rpc request failed")
			st.Calls, st.Errors, st.Denied = calls, errs, denied
			st.Errors++
			ticket, refusal = refused(Answer{Text: msgRequestFailed}, RoundTripError)
		}
	}()
	text, byPolicy, gated := g.cfg.verdict(c.Tool)
	switch {
	case byPolicy:
		st.Denied++
		return refused(Answer{Text: asShown(text)}, RoundTripDenied)
	case text != "":
		st.Errors++
		return refused(Answer{Text: text}, RoundTripError)
	}
	call.Gated = gated
	if call.Gated != c.Gated {
		// The node's policy is the session side's, sent with the cell:
		// a difference is a node that lies or runs another version. The
		// guard's verdict holds either way.
		g.cfg.Logger.Warn().Str("tool", c.Tool).Int64("id", c.ID).Bool("node_gated", c.Gated).
			Msg("execute_code cluster guard overrode a node's gating")
	}
	call.ApprovalID = approval.NewID()
	g.inFlight[c.ID] = call
	ticket = &guardTicket{call: call, turn: make(chan struct{})}
	g.queue = append(g.queue, ticket)
	g.promote()
	return ticket, Answer{}
}

// promote opens the turn of the queue's head; the caller holds mu.
func (g *GuardedGate) promote() {
	if len(g.queue) > 0 && !g.queue[0].headed {
		g.queue[0].headed = true
		close(g.queue[0].turn)
	}
}

// finish spends a's result bytes on the guard's budget, moves the call to
// the answered ledger, hands the turn on and reports the round trip. It
// returns what the node gets: an answer its own pump settles to the
// figures the guard counted.
func (g *GuardedGate) finish(t *guardTicket, a Answer) Answer {
	call := t.call
	g.mu.Lock()
	ok, text := g.stats.spend(a, call.Tool, g.cfg.MaxResultBytes)
	var out Answer
	switch {
	case ok:
		out = Answer{OK: true, Text: text, JSON: a.JSON, Untrusted: a.Untrusted}
	case a.OK:
		out = Answer{Text: text} // over budget: an error, never untrusted
	case a.Blocked:
		out = Answer{Blocked: true, Text: asShown(text)}
	default:
		out = Answer{Text: asShown(text), Untrusted: a.Untrusted}
	}
	call.Answered, call.Outcome = true, roundTripOutcome(ok, a.Blocked)
	delete(g.inFlight, call.ID)
	g.keep(*call)
	if i := slices.Index(g.queue, t); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		g.promote()
	}
	g.mu.Unlock()
	reportRoundTrip(&g.cfg, call.Tool, call.Admitted, ok, a.Blocked)
	return out
}

// asShown is an error text as the script reads it: a local pump writes
// each byte that is not UTF-8 as U+FFFD (response.go, appendJSONString).
func asShown(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// keep adds an answered call to the ledger; the caller holds mu.
func (g *GuardedGate) keep(c GuardedCall) {
	if len(g.answered) < maxGuardLedger {
		g.answered = append(g.answered, c)
		return
	}
	g.answered[g.next] = c
	g.next = (g.next + 1) % maxGuardLedger
	g.dropped++
}

// Stats is the guard's own accounting of the calls it was asked: Calls
// and Bytes are what it charged, Seen the ids it charged. A call the node
// refused itself never reaches the guard, so the node's figures can only
// be higher, never lower, for an honest node.
func (g *GuardedGate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats.Clone()
}

// Ledger is every call the guard charged that it still keeps: the last
// answered ones, oldest first, then those in flight by id; dropped is how
// many answered ones it no longer keeps.
func (g *GuardedGate) Ledger() (calls []GuardedCall, dropped int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls = make([]GuardedCall, 0, len(g.answered)+len(g.inFlight))
	calls = append(calls, g.answered[g.next:]...)
	calls = append(calls, g.answered[:g.next]...)
	return append(calls, g.unanswered()...), g.dropped
}

// Unanswered are the calls in flight, by id: run (or waiting to run) here
// and not answered yet. When the node is lost these are the calls whose
// answers nobody received.
func (g *GuardedGate) Unanswered() []GuardedCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unanswered()
}

func (g *GuardedGate) unanswered() []GuardedCall {
	out := make([]GuardedCall, 0, len(g.inFlight))
	for _, id := range slices.Sorted(maps.Keys(g.inFlight)) {
		out = append(out, *g.inFlight[id])
	}
	return out
}

// paramsOver says whether params cannot have come from a request the
// local pump reads (at most limit bytes, decoded by encoding/json): it
// counts a lower bound of the bytes their JSON took, whatever the encoder
// (a string at least its UTF-8 bytes and quotes, a number one byte), and
// stops past limit or past encoding/json's nesting bound.
func paramsOver(params map[string]any, limit int) bool {
	return jsonLowerBound(params, limit, 0) > limit
}

// maxJSONDepth is encoding/json's own nesting bound: no request the pump
// decoded nests deeper.
const maxJSONDepth = 10000

func jsonLowerBound(v any, limit, depth int) int {
	if depth > maxJSONDepth {
		return limit + 1
	}
	switch x := v.(type) {
	case nil, bool:
		return 4
	case string:
		return len(x) + 2
	case map[string]any:
		n := 2 + max(len(x)-1, 0) // braces, commas
		for k, e := range x {
			if n > limit {
				return n
			}
			n += len(k) + 3 + jsonLowerBound(e, limit-n, depth+1) // quotes, colon
		}
		return n
	case []any:
		n := 2 + max(len(x)-1, 0)
		for _, e := range x {
			if n > limit {
				return n
			}
			n += jsonLowerBound(e, limit-n, depth+1)
		}
		return n
	}
	return 1 // a number
}
