package approval

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// askTimeout bounds one exchange with the broker actor, which answers at
// once unless it is gone: it only matters when it is.
const askTimeout = 10 * time.Second

// reasonCallerDone is the cancel reason of a waiter whose context ended.
const reasonCallerDone = "approval request context done"

// Broker is the handle of a broker actor spawned from Props.
type Broker struct {
	root *actor.RootContext
	pid  *actor.PID

	// beforeExpire, when set (tests), runs after a waiter's timer fired
	// and before its timeout transition is sent.
	beforeExpire func(id string)
}

// NewBroker wraps the broker actor pid.
func NewBroker(root *actor.RootContext, pid *actor.PID) *Broker {
	return &Broker{root: root, pid: pid}
}

// Request asks for approval of one call and waits for the outcome. A
// stored approval answers at once, without a prompt. Otherwise a prompt is
// registered under req.ID (a new id when empty), the Approver is asked on
// its own goroutine, and the first of these takes the prompt: Resolve,
// Cancel, the Approver's answer, the end of ctx (a cancel: Cancelled) or
// req.Timeout (TimedOut; a timeout that loses to another transition still
// returns TimedOut, and the winner's effects stand). An Approver failure
// is an error wrapping ErrApproverFailed. A request whose ctx is already
// done returns Cancelled without a prompt.
func (b *Broker) Request(ctx context.Context, req Request) (Outcome, error) {
	if req.Tool == "" {
		return Outcome{}, fmt.Errorf("request approval: %w: no tool", ErrInvalidRequest)
	}
	if req.ID == "" {
		req.ID = NewID()
	}
	if ctx.Err() != nil {
		return Outcome{Cancelled: true}, nil
	}
	done := make(chan settlement, 1)
	res, err := b.ask(&register{req: req, hash: argsHash(req.Args), done: done})
	if err != nil {
		return Outcome{}, fmt.Errorf("request approval: %w", err)
	}
	reg, ok := res.(*registered)
	switch {
	case !ok:
		return Outcome{}, fmt.Errorf("request approval: %w: answer %T", ErrUnavailable, res)
	case reg.err != nil:
		return Outcome{}, reg.err
	case reg.answered:
		return reg.outcome, nil
	}

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case s := <-done:
		return s.outcome, s.err
	case <-ctx.Done():
		_ = b.transition(&cancel{id: req.ID, serial: reg.serial, reason: reasonCallerDone})
		// Whoever took the prompt, this cancel or an earlier winner, put
		// its settlement in done before answering.
		select {
		case s := <-done:
			return s.outcome, s.err
		default:
			return Outcome{Cancelled: true}, nil
		}
	case <-timeout:
		if b.beforeExpire != nil {
			b.beforeExpire(req.ID)
		}
		// Won or lost, the waiter has timed out; only a winning timeout
		// has effects, and those the broker applied already.
		_ = b.transition(&expire{id: req.ID, serial: reg.serial})
		return Outcome{TimedOut: true}, nil
	}
}

// Resolve answers the pending prompt id with d. Only when it takes the
// prompt does it store the approval d grants; otherwise it returns
// ErrNotPending and changes nothing.
func (b *Broker) Resolve(id string, d Decision) error {
	if !d.valid() {
		return fmt.Errorf("resolve approval: %w", ErrInvalidDecision)
	}
	return b.transition(&resolve{id: id, decision: d})
}

// Cancel withdraws the pending prompt id; its waiter gets Cancelled.
// ErrNotPending when no prompt with that id is pending. reason is for the
// caller's records: it is not logged or emitted.
func (b *Broker) Cancel(id, reason string) error {
	return b.transition(&cancel{id: id, reason: reason})
}

// Pending returns the number of pending prompts (0 when the broker is
// gone).
func (b *Broker) Pending() int {
	res, err := b.ask(&pendingQuery{})
	if err != nil {
		return 0
	}
	if c, ok := res.(*pendingCount); ok {
		return c.n
	}
	return 0
}

// Watch spawns a watcher (a child of the broker) that cancels the prompt
// id after sweep closes and again after dispatch closes, and stops once
// both closed. A nil channel never closes. Call it before the Request
// whose prompt it guards.
func (b *Broker) Watch(id string, sweep, dispatch <-chan struct{}) {
	b.root.Send(b.pid, &watch{id: id, sweep: sweep, dispatch: dispatch})
}

func (b *Broker) transition(msg any) error {
	res, err := b.ask(msg)
	if err != nil {
		return err
	}
	r, ok := res.(*transitionReply)
	if !ok {
		return fmt.Errorf("%w: answer %T", ErrUnavailable, res)
	}
	return r.err
}

func (b *Broker) ask(msg any) (any, error) {
	res, err := b.root.RequestFuture(b.pid, msg, askTimeout).Result()
	if err != nil {
		// actor.ErrDeadLetter (the broker is gone) or actor.ErrTimeout.
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return res, nil
}
