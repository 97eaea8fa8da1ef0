package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPolicyChecksDenyBeforeAllow(t *testing.T) {
	cases := []struct {
		name   string
		policy Policy
		tool   string
		ok     bool
		reason string
	}{
		{name: "zero policy allows everything", tool: "webfetch", ok: true},
		{name: "deny list refuses", policy: Policy{Deny: []string{"webfetch"}}, tool: "webfetch",
			reason: "Tool 'webfetch' is in deny list"},
		{name: "deny list leaves others alone", policy: Policy{Deny: []string{"webfetch"}}, tool: "read", ok: true},
		{name: "allow list admits its members", policy: Policy{Allow: []string{"read", "ls"}}, tool: "ls", ok: true},
		{name: "allow list refuses the rest", policy: Policy{Allow: []string{"read"}}, tool: "grep",
			reason: "Tool 'grep' not in allowed list"},
		{name: "deny wins over allow", policy: Policy{Allow: []string{"read"}, Deny: []string{"read"}}, tool: "read",
			reason: "Tool 'read' is in deny list"},
		{name: "names are case sensitive", policy: Policy{Allow: []string{"Read"}}, tool: "read",
			reason: "Tool 'read' not in allowed list"},
		{name: "an empty allow list is no allow list", policy: Policy{Allow: []string{}}, tool: "find", ok: true},
		{name: "require_approval does not refuse", policy: Policy{RequireApproval: []string{"read"}}, tool: "read", ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := tc.policy.Allowed(tc.tool)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.reason, reason)
		})
	}
}

func TestPolicyRequiresApprovalOnlyForListedTools(t *testing.T) {
	p := Policy{RequireApproval: []string{"webfetch"}, Deny: []string{"read"}}
	assert.True(t, p.RequiresApproval("webfetch"))
	assert.False(t, p.RequiresApproval("read"), "deny does not imply approval")
	assert.False(t, p.RequiresApproval("WebFetch"))
	assert.False(t, Policy{}.RequiresApproval("webfetch"))
}

func TestPolicyIsZeroOnlyWithoutAnyList(t *testing.T) {
	assert.True(t, Policy{}.IsZero())
	assert.True(t, Policy{Allow: []string{}}.IsZero())
	assert.False(t, Policy{Deny: []string{"ls"}}.IsZero())
	assert.False(t, Policy{RequireApproval: []string{"ls"}}.IsZero())
}

// The pump names its policy through an interface it owns; a pointer and a
// value both satisfy it.
func TestPolicyValueAndPointerShareTheirMethods(t *testing.T) {
	type policy interface {
		Allowed(string) (bool, string)
		RequiresApproval(string) bool
	}
	for _, p := range []policy{Policy{Deny: []string{"ls"}}, &Policy{Deny: []string{"ls"}}} {
		ok, _ := p.Allowed("ls")
		assert.False(t, ok)
	}
}
