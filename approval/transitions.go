package approval

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/telemetry"
)

// brokerActor is the broker's state; only its Receive touches it.
type brokerActor struct {
	cfg      Config
	behavior actor.Behavior
	pending  map[string]*record
	stored   *store
}

// serials numbers prompts across every broker and incarnation, so a
// waiter's or an Approver's message about an earlier prompt can never
// take a later one that reuses its id, not even after a restart.
var serials atomic.Uint64

// record is one pending prompt.
type record struct {
	req    Request
	hash   string
	serial uint64
	done   chan settlement
	// stop cancels the Approver's context; whoever takes the record calls
	// it.
	stop  context.CancelFunc
	since time.Time
}

func newBrokerActor(cfg Config) *brokerActor {
	b := &brokerActor{cfg: cfg, behavior: actor.NewBehavior(), pending: map[string]*record{}, stored: newStore()}
	for _, g := range cfg.Grants {
		if !b.grant(g) {
			cfg.Logger.Warn().Str("scope", string(g.Scope)).Msg("approval grant ignored")
		}
	}
	b.behavior.Become(b.open)
	return b
}

func (b *brokerActor) grant(g Grant) bool {
	if g.Tool == "" || (g.Scope != ApproveGlobal && g.Owner == "") {
		return false
	}
	switch g.Scope {
	case ApproveGlobal:
		g.Owner = ""
	case ApproveAgent, ApproveSession:
	default:
		return false
	}
	b.stored.put(grantKey{scope: g.Scope, owner: g.Owner, tool: g.Tool, args: anyArgs})
	return true
}

func (b *brokerActor) Receive(ctx actor.Context) { b.behavior.Receive(ctx) }

// open is the broker's behaviour while it runs.
func (b *brokerActor) open(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *register:
		ctx.Respond(b.onRegister(ctx, m))
	case *resolve:
		ctx.Respond(&transitionReply{err: b.onResolve(m)})
	case *cancel:
		ctx.Respond(&transitionReply{err: b.onCancel(m)})
	case *expire:
		ctx.Respond(&transitionReply{err: b.onExpire(m)})
	case *approverAnswered:
		b.onApproverAnswered(m)
	case *pendingQuery:
		ctx.Respond(&pendingCount{n: len(b.pending)})
	case *watch:
		ctx.Spawn(watcherProps(m, b.cfg.watchHook))
	case *actor.Stopping, *actor.Restarting:
		b.shutdown()
		b.behavior.Become(b.closed)
	}
}

// closed is the behaviour once the broker is stopping or restarting: its
// prompts are settled, nothing new is registered and no watcher is
// spawned (a child spawned now would never be stopped, and the broker
// would wait for it forever).
func (b *brokerActor) closed(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *register:
		ctx.Respond(&registered{err: ErrUnavailable})
	case *resolve, *cancel, *expire:
		ctx.Respond(&transitionReply{err: ErrNotPending})
	case *pendingQuery:
		ctx.Respond(&pendingCount{})
	}
}

func (b *brokerActor) onRegister(ctx actor.Context, m *register) *registered {
	req := m.req
	if scope, ok := b.stored.lookup(req.Tool, m.hash, req.SessionID, req.AgentID); ok {
		return &registered{answered: true, outcome: Outcome{Approved: true, Scope: scope}}
	}
	if _, dup := b.pending[req.ID]; dup {
		return &registered{err: fmt.Errorf("request approval: %w", ErrDuplicateID)}
	}
	rec := &record{req: req, hash: m.hash, serial: serials.Add(1), done: m.done, stop: func() {}, since: b.cfg.Now()}
	b.pending[req.ID] = rec
	b.cfg.Telemetry.Emit(telemetry.ApprovalRequested{Tool: telemetry.ApprovalToolFor(req.Tool)})
	if b.cfg.Approver != nil {
		actx, stop := context.WithCancel(context.Background())
		rec.stop = stop
		go askApprover(actx, b.cfg.Approver, req, rec.serial, ctx.ActorSystem().Root, ctx.Self())
	}
	return &registered{serial: rec.serial}
}

// take is the single-winner step every transition starts with: it
// removes and returns the pending record (of serial, or any serial when
// 0), and stops its Approver. Only the caller that got the record may
// apply effects.
func (b *brokerActor) take(id string, serial uint64) (*record, bool) {
	rec, ok := b.pending[id]
	if !ok || (serial != 0 && rec.serial != serial) {
		return nil, false
	}
	delete(b.pending, id)
	rec.stop()
	return rec, true
}

func (b *brokerActor) onResolve(m *resolve) error {
	if !m.decision.valid() {
		return fmt.Errorf("resolve approval: %w", ErrInvalidDecision)
	}
	rec, ok := b.take(m.id, 0)
	if !ok {
		return ErrNotPending
	}
	b.decide(rec, m.decision)
	return nil
}

func (b *brokerActor) onCancel(m *cancel) error {
	rec, ok := b.take(m.id, m.serial)
	if !ok {
		return ErrNotPending
	}
	b.settle(rec, telemetry.ApprovalCancelled, settlement{outcome: Outcome{Cancelled: true}})
	return nil
}

func (b *brokerActor) onExpire(m *expire) error {
	rec, ok := b.take(m.id, m.serial)
	if !ok {
		return ErrNotPending
	}
	b.settle(rec, telemetry.ApprovalTimeout, settlement{outcome: Outcome{TimedOut: true}})
	return nil
}

// onApproverAnswered applies the Approver's answer if the prompt is still
// its own; a late answer (the prompt was taken meanwhile) changes nothing.
func (b *brokerActor) onApproverAnswered(m *approverAnswered) {
	rec, ok := b.take(m.id, m.serial)
	if !ok {
		return
	}
	if m.err != nil {
		b.cfg.Logger.Warn().Str("failure", m.failure).Msg("approver failed")
		b.settle(rec, telemetry.ApprovalFailed, settlement{err: m.err})
		return
	}
	b.decide(rec, m.decision)
}

// decide applies a winning decision: the approval it grants is stored,
// and the waiter learns the outcome.
func (b *brokerActor) decide(rec *record, d Decision) {
	b.stored.install(d, rec.req.Tool, rec.hash, rec.req.SessionID, rec.req.AgentID)
	b.settle(rec, d.telemetry(), settlement{outcome: Outcome{Approved: d != Deny, Scope: d}})
}

// settle emits the one resolved event of a taken record and hands its
// waiter the outcome (the channel has room for exactly this one).
func (b *brokerActor) settle(rec *record, d telemetry.ApprovalDecision, s settlement) {
	b.cfg.Telemetry.Emit(telemetry.ApprovalResolved{Tool: telemetry.ApprovalToolFor(rec.req.Tool), Decision: d})
	b.cfg.Logger.Debug().Str("decision", string(d)).
		Int64("waited_ms", max(b.cfg.Now().Sub(rec.since).Milliseconds(), 0)).Msg("approval settled")
	rec.done <- s
}

// shutdown cancels every pending prompt: the state dies with this
// incarnation, and no waiter may be left without an answer.
func (b *brokerActor) shutdown() {
	for id := range b.pending {
		if rec, ok := b.take(id, 0); ok {
			b.settle(rec, telemetry.ApprovalCancelled, settlement{outcome: Outcome{Cancelled: true}})
		}
	}
}
