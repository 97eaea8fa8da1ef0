package executecode

import (
	"context"
	"errors"
	"fmt"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/pump"
)

// WithApprover sets the host's prompt for helper calls the policy
// (`require_approval`) gates. Without one, every gated call is denied: a
// prompt nobody can answer must not let the call through.
func WithApprover(a approval.Approver) Option { return func(r *Runtime) { r.approver = a } }

// denyAll answers every prompt of a runtime built without an Approver.
var denyAll = approval.ApproverFunc(func(context.Context, approval.Request) (approval.Decision, error) {
	return approval.Deny, nil
})

// ErrApprovalsOff reports a ResolveApproval on a runtime whose policy
// gates nothing, so no prompt can ever be pending.
var ErrApprovalsOff = errors.New("no helper call of this runtime needs approval")

// gate returns the policy every helper call of a run goes through and,
// when the policy gates some tool, the approval broker.
func (r *Runtime) gate() (pump.Policy, *approval.Broker, error) {
	p := r.cfg.Policy()
	if p.IsZero() {
		return nil, nil, nil
	}
	if len(p.RequireApproval) == 0 {
		return p, nil, nil
	}
	tree, err := r.kernels()
	if err != nil {
		return nil, nil, fmt.Errorf("approvals: %w", err)
	}
	return p, tree.Approvals, nil
}

// ResolveApproval answers a pending prompt with a decision. It returns an
// error wrapping approval.ErrNotPending for an id that is unknown or no
// longer pending (already answered, cancelled, timed out); such a decision
// installs nothing.
func (r *Runtime) ResolveApproval(id string, d approval.Decision) error {
	r.mu.Lock()
	tree := r.tree
	r.mu.Unlock()
	if tree == nil {
		return fmt.Errorf("approval %q: %w", id, approval.ErrNotPending)
	}
	return tree.Approvals.Resolve(id, d)
}
