package telemetry

import (
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/tools"
)

// Events of the approval broker (lemon.approvals.*). Other hosts also
// attach the approval id, run, session and agent ids to
// these events; here they are left out on purpose (identities never reach
// telemetry), and the tool is a name from the helper allowlist or "other".

// ApprovalTool is the helper an approval is for: one of the tools
// package's names, or "other".
type ApprovalTool string

const (
	ApprovalToolRead     ApprovalTool = tools.Read
	ApprovalToolGrep     ApprovalTool = tools.Grep
	ApprovalToolFind     ApprovalTool = tools.Find
	ApprovalToolLs       ApprovalTool = tools.Ls
	ApprovalToolWebfetch ApprovalTool = tools.Webfetch
	ApprovalToolOther    ApprovalTool = "other"
)

// ApprovalTools lists every tool an approval event can name.
var ApprovalTools = []ApprovalTool{ApprovalToolRead, ApprovalToolGrep, ApprovalToolFind, ApprovalToolLs,
	ApprovalToolWebfetch, ApprovalToolOther}

// String is the tool as events carry it: a name outside the helper
// allowlist reads as "other".
func (t ApprovalTool) String() string { return t.valid() }

// ApprovalToolFor maps a tool name to its bounded form: an allowlist name
// stays itself, anything else becomes "other".
func ApprovalToolFor(name string) ApprovalTool {
	return ApprovalTool(ApprovalTool(name).valid())
}

func (t ApprovalTool) valid() string {
	switch t {
	case ApprovalToolRead, ApprovalToolGrep, ApprovalToolFind, ApprovalToolLs, ApprovalToolWebfetch:
		return string(t)
	}
	return string(ApprovalToolOther)
}

// ApprovalDecision says how a pending approval ended.
type ApprovalDecision string

const (
	ApprovalApproveOnce    ApprovalDecision = "approve_once"
	ApprovalApproveSession ApprovalDecision = "approve_session"
	ApprovalApproveAgent   ApprovalDecision = "approve_agent"
	ApprovalApproveGlobal  ApprovalDecision = "approve_global"
	ApprovalDeny           ApprovalDecision = "deny"
	ApprovalCancelled      ApprovalDecision = "cancelled"
	ApprovalTimeout        ApprovalDecision = "timeout"
	// ApprovalFailed: the host's approver failed (error, panic or an
	// answer that is no decision).
	ApprovalFailed  ApprovalDecision = "failed"
	ApprovalUnknown ApprovalDecision = "unknown"
)

// ApprovalDecisions lists every decision an approval event can carry.
var ApprovalDecisions = []ApprovalDecision{ApprovalApproveOnce, ApprovalApproveSession, ApprovalApproveAgent,
	ApprovalApproveGlobal, ApprovalDeny, ApprovalCancelled, ApprovalTimeout, ApprovalFailed, ApprovalUnknown}

// String is the decision as events carry it: a value outside the list
// reads as "unknown".
func (d ApprovalDecision) String() string { return d.valid() }

func (d ApprovalDecision) valid() string {
	switch d {
	case ApprovalApproveOnce, ApprovalApproveSession, ApprovalApproveAgent, ApprovalApproveGlobal,
		ApprovalDeny, ApprovalCancelled, ApprovalTimeout, ApprovalFailed:
		return string(d)
	}
	return string(ApprovalUnknown)
}

// ApprovalRequested: a prompt was registered (no stored approval answered
// the call).
type ApprovalRequested struct {
	Tool ApprovalTool
}

func (ApprovalRequested) Name() string { return "lemon.approvals.requested" }

func (r ApprovalRequested) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Str("tool", r.Tool.valid())
}

// ApprovalResolved: a pending prompt was taken by exactly one of resolve,
// cancel, the waiter's timeout or the approver's own answer.
type ApprovalResolved struct {
	Tool     ApprovalTool
	Decision ApprovalDecision
}

func (ApprovalResolved) Name() string { return "lemon.approvals.resolved" }

func (r ApprovalResolved) MarshalZerologObject(e *zerolog.Event) {
	e.Int("count", 1).Str("tool", r.Tool.valid()).Str("decision", r.Decision.valid())
}
