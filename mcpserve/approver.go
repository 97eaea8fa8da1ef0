package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/executecode/executecode/approval"
)

// decisions are the answers an elicitation offers, strongest last but
// for deny, which is the safe one and comes first.
var decisions = []string{
	string(approval.Deny), string(approval.ApproveOnce), string(approval.ApproveSession),
	string(approval.ApproveAgent), string(approval.ApproveGlobal),
}

// Approver asks the MCP client whose call needs an approval, with an
// elicitation, when that client declared the capability; any other
// request (a client without it, a call that did not come over MCP) goes
// to fallback, or is denied when fallback is nil. Give it to the Runtime
// with executecode.WithApprover.
func Approver(fallback approval.Approver) approval.Approver {
	return approval.ApproverFunc(func(ctx context.Context, req approval.Request) (approval.Decision, error) {
		r, ok := req.Caller.(*run)
		if !ok || !elicits(r.ss) {
			if fallback == nil {
				return approval.Deny, nil
			}
			return fallback.Decide(ctx, req)
		}
		return r.ask(ctx, elicitation(req))
	})
}

// elicits says whether ss's client declared elicitation (form mode, or
// the capability without modes, which means form).
func elicits(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// elicitation is the form that asks the user for req's decision.
func elicitation(req approval.Request) *mcp.ElicitParams {
	msg := fmt.Sprintf("The script asks to run %s with %s.", req.Tool, argsText(req.Args))
	if req.Rationale != "" {
		msg += " (" + req.Rationale + ")"
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{
					"type": "string", "enum": decisions, "default": string(approval.Deny),
					"description": "deny, or approve once, for this session, for this agent, or for every session",
				},
			},
			"required": []string{"decision"},
		},
	}
}

// decisionOf reads the user's answer: declining, cancelling, no answer or
// one outside the offered decisions is a deny.
func decisionOf(res *mcp.ElicitResult) approval.Decision {
	if res == nil || res.Action != "accept" {
		return approval.Deny
	}
	s, _ := res.Content["decision"].(string)
	d, err := approval.ParseDecision(s)
	if err != nil {
		return approval.Deny
	}
	return d
}

// argsText shows the call's arguments as JSON, cut to a line a prompt can
// hold.
func argsText(args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		return "arguments that do not encode"
	}
	const max = 300
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
