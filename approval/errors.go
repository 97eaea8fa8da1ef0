package approval

import "errors"

var (
	// ErrNotPending: no pending prompt has this id (never registered, or
	// already taken by another transition). The caller caused nothing.
	ErrNotPending = errors.New("not_pending")
	// ErrInvalidDecision: a decision that is none of approve_once,
	// approve_session, approve_agent, approve_global, deny.
	ErrInvalidDecision = errors.New("invalid approval decision")
	// ErrInvalidRequest: a request without a tool.
	ErrInvalidRequest = errors.New("invalid approval request")
	// ErrDuplicateID: a prompt with this id is already pending.
	ErrDuplicateID = errors.New("approval id already pending")
	// ErrApproverFailed: the host's Approver returned an error, panicked
	// or answered something that is no decision.
	ErrApproverFailed = errors.New("approver failed")
	// ErrUnavailable: the broker actor is gone or did not answer.
	ErrUnavailable = errors.New("approval broker unavailable")
)
