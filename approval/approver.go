package approval

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// askApprover runs one Approver call on its own goroutine and sends the
// broker the answer; it never touches the broker's state. A panicking
// Approver is contained as a failure. An answer that arrives after the
// prompt was taken (ctx is done) is not even sent.
func askApprover(ctx context.Context, a Approver, req Request, serial uint64, root *actor.RootContext, broker *actor.PID) {
	msg := &approverAnswered{id: req.ID, serial: serial}
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg.decision, msg.err, msg.failure = "", fmt.Errorf("%w: panic", ErrApproverFailed), "panic"
			}
		}()
		d, err := a.Decide(ctx, req)
		switch {
		case err != nil:
			msg.err, msg.failure = fmt.Errorf("%w: %w", ErrApproverFailed, err), "error"
		case !d.valid():
			msg.err, msg.failure = fmt.Errorf("%w: %w", ErrApproverFailed, ErrInvalidDecision), "invalid_decision"
		default:
			msg.decision = d
		}
	}()
	if ctx.Err() != nil {
		return
	}
	root.Send(broker, msg)
}
