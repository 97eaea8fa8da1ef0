package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/executecode/executecode/telemetry"
)

// Decision is an answer to a prompt.
type Decision string

const (
	ApproveOnce    Decision = "approve_once"
	ApproveSession Decision = "approve_session"
	ApproveAgent   Decision = "approve_agent"
	ApproveGlobal  Decision = "approve_global"
	Deny           Decision = "deny"
)

// ParseDecision reads a decision as the serve protocol and the CLI spell
// it: the five names, and "allow" for approve_once.
func ParseDecision(s string) (Decision, error) {
	if s == "allow" {
		return ApproveOnce, nil
	}
	d := Decision(s)
	if !d.valid() {
		return "", fmt.Errorf("parse decision %q: %w", s, ErrInvalidDecision)
	}
	return d, nil
}

func (d Decision) valid() bool {
	switch d {
	case ApproveOnce, ApproveSession, ApproveAgent, ApproveGlobal, Deny:
		return true
	}
	return false
}

// Request asks for approval of one helper call.
type Request struct {
	// ID names the prompt; empty means a new one (NewID). The pump passes
	// the id it allocated at claim time.
	ID   string
	Tool string
	// Args are the call's arguments; approvals are stored against their
	// canonical JSON hash. The Approver must not modify them.
	Args      map[string]any
	Rationale string
	SessionID string
	AgentID   string
	// Timeout bounds the wait for a decision; zero or negative means none.
	Timeout time.Duration
	// Caller is the host's own tag for the call the request belongs to,
	// passed to the Approver untouched; the broker never reads it.
	Caller any
}

// Outcome is how a request ended. Approved carries the scope that
// answered (a stored approval's or the prompt's decision); a denied
// prompt has Scope Deny; Cancelled and TimedOut are never approved.
type Outcome struct {
	Approved  bool
	Scope     Decision
	TimedOut  bool
	Cancelled bool
}

// Approver is the host's prompt: it is asked for every approval that no
// stored approval answers.
// It must return when ctx is done (the prompt was cancelled, timed out or
// resolved elsewhere); whatever it answers after that is ignored.
type Approver interface {
	Decide(ctx context.Context, req Request) (Decision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req Request) (Decision, error)

func (f ApproverFunc) Decide(ctx context.Context, req Request) (Decision, error) { return f(ctx, req) }

// NewID returns a fresh approval id, "appr_" and a random version-4 UUID.
func NewID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand aborts the program instead)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return "appr_" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (d Decision) telemetry() telemetry.ApprovalDecision { return telemetry.ApprovalDecision(d) }
