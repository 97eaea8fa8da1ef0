package tools

import (
	"fmt"
	"slices"
)

// Policy is the per-tool allow / deny / require-approval policy applied to
// every helper call, at its claim (docs/protocol.md, A helper call, step by
// step). It can only refuse or gate a call: a name it allows is still
// unreachable unless the helper set holds it, so no policy widens Allowlist.
//
// Names are matched exactly (case-sensitive), as tool names are. The zero
// Policy allows everything and gates nothing.
type Policy struct {
	// Allow, when non-empty, is the only tools that may run.
	Allow []string
	// Deny always refuses; it wins over Allow.
	Deny []string
	// RequireApproval lists the tools whose calls need a host's approval
	// before they run.
	RequireApproval []string
}

// Allowed reports whether tool may run, and the reason it may not. Deny is
// checked first so a tool on both lists is reported as denied, which is
// the more useful reason.
func (p Policy) Allowed(tool string) (ok bool, reason string) {
	if slices.Contains(p.Deny, tool) {
		return false, fmt.Sprintf("Tool '%s' is in deny list", tool)
	}
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, tool) {
		return false, fmt.Sprintf("Tool '%s' not in allowed list", tool)
	}
	return true, ""
}

// RequiresApproval reports whether a call of tool must be approved before
// it runs. It says nothing about whether the tool is allowed: callers check
// Allowed first, so a denied call never prompts.
func (p Policy) RequiresApproval(tool string) bool {
	return slices.Contains(p.RequireApproval, tool)
}

// IsZero reports whether p neither refuses nor gates anything.
func (p Policy) IsZero() bool {
	return len(p.Allow) == 0 && len(p.Deny) == 0 && len(p.RequireApproval) == 0
}
