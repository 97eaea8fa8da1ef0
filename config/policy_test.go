package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

func TestPolicyListsResolveLikeToolsButAsSets(t *testing.T) {
	cases := []struct {
		name  string
		key   string
		toml  string
		env   *string
		over  any
		want  []string
		warns int
	}{
		{name: "absent is no list", key: "deny", want: []string{}},
		{name: "empty toml list is no list", key: "deny", toml: "[]", want: []string{}},
		{name: "toml list keeps order, drops duplicates", key: "deny", toml: `["webfetch", "read", "webfetch"]`, want: []string{"webfetch", "read"}},
		{name: "toml string splits on commas", key: "require_approval", toml: `" webfetch , ls"`, want: []string{"webfetch", "ls"}},
		{name: "unknown names are warned once and dropped", key: "deny", toml: `["bash", "webfetch", "bash", "Read"]`, want: []string{"webfetch"}, warns: 1},
		{name: "only unknown names in deny deny nothing", key: "deny", toml: `["bash"]`, want: []string{}, warns: 1},
		{name: "only unknown names in require_approval gate nothing", key: "require_approval", toml: `["write"]`, want: []string{}, warns: 1},
		{name: "only unknown names in allow allow nothing", key: "allow", toml: `["bash", "Read"]`, want: []string{NoTools}, warns: 1},
		{name: "none in allow allows nothing silently", key: "allow", toml: `["none"]`, want: []string{NoTools}},
		{name: "none beside a tool is dropped silently", key: "allow", toml: `["none", "ls"]`, want: []string{"ls"}},
		{name: "none in deny is nothing", key: "deny", toml: `["none"]`, want: []string{}},
		{name: "env comma list wins over toml", key: "deny", toml: `["read"]`, env: ptr("webfetch,grep"), want: []string{"webfetch", "grep"}},
		{name: "empty env falls back to toml", key: "allow", toml: `["read"]`, env: ptr(""), want: []string{"read"}},
		{name: "env of only commas falls back to toml", key: "allow", toml: `["read"]`, env: ptr(" , "), want: []string{"read"}},
		{name: "env require_approval", key: "require_approval", env: ptr("webfetch"), want: []string{"webfetch"}},
		{name: "override slice beats env", key: "allow", env: ptr("ls"), over: []string{"find"}, want: []string{"find"}},
		{name: "override string", key: "deny", over: "read,ls", want: []string{"read", "ls"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := in{}
			if tc.toml != "" {
				i.toml = table(tc.key + " = " + tc.toml)
			}
			if tc.env != nil {
				i.env = []string{EnvName(tc.key) + "=" + *tc.env}
			}
			if tc.over != nil {
				i.over = map[string]any{tc.key: tc.over}
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, *policyField(&r.cfg, tc.key))
			assertWarnings(t, r.warnings, tc.key, tc.warns, showList(tc.want))
		})
	}
}

func TestPolicyEnvironmentVariablesHaveTheDocumentedNames(t *testing.T) {
	r := load(t, in{env: []string{
		"LEMON_EXECUTE_CODE_ALLOW=read,webfetch",
		"LEMON_EXECUTE_CODE_DENY=webfetch",
		"LEMON_EXECUTE_CODE_REQUIRE_APPROVAL=read",
		"LEMON_EXECUTE_CODE_APPROVAL_TIMEOUT_MS=2500",
	}})
	require.NoError(t, r.err)
	assert.Empty(t, r.warnings)
	assert.Equal(t, tools.Policy{Allow: []string{"read", "webfetch"}, Deny: []string{"webfetch"}, RequireApproval: []string{"read"}}, r.cfg.Policy())
	assert.Equal(t, 2500*time.Millisecond, r.cfg.ApprovalTimeout())
}

func TestConfiguredPolicyIsApplied(t *testing.T) {
	r := load(t, in{toml: table(`allow = ["read", "webfetch"]
deny = ["webfetch"]
require_approval = ["read"]`)})
	require.NoError(t, r.err)
	p := r.cfg.Policy()
	ok, reason := p.Allowed("webfetch")
	assert.False(t, ok)
	assert.Equal(t, "Tool 'webfetch' is in deny list", reason)
	ok, reason = p.Allowed("ls")
	assert.False(t, ok)
	assert.Equal(t, "Tool 'ls' not in allowed list", reason)
	ok, _ = p.Allowed("read")
	assert.True(t, ok)
	assert.True(t, p.RequiresApproval("read"))

	p.Deny[0] = "read"
	assert.Equal(t, []string{"webfetch"}, r.cfg.Deny, "Policy returns copies")
}

func TestAnAllowListOfUnknownToolsFailsClosed(t *testing.T) {
	r := load(t, in{toml: table(`allow = ["Read"]`)})
	require.NoError(t, r.err)
	for _, name := range tools.Allowlist {
		ok, reason := r.cfg.Policy().Allowed(name)
		assert.False(t, ok, name)
		assert.Contains(t, reason, "not in allowed list")
	}
}

func TestApprovalTimeoutDefaultsToFiveMinutes(t *testing.T) {
	r := load(t, in{})
	require.NoError(t, r.err)
	assert.Equal(t, 5*time.Minute, r.cfg.ApprovalTimeout())
	assert.True(t, r.cfg.Policy().IsZero())
}

// The tools entry and the policy lists may name the host's own tools when
// it says which they are; naming a host tool registers nothing.
func TestPolicyListsNameTheHostToolsItDeclares(t *testing.T) {
	opts := Options{Env: []string{}, Cwd: t.TempDir(), HostTools: []string{"weather"},
		File: writeTOML(t, table(`deny = ["weather", "bash"]`+"\n"+`require_approval = ["weather"]`+"\n"+`allow = ["weather", "read"]`+"\n"+`tools = ["read", "weather"]`))}
	r := loadOpts(t, opts)
	require.NoError(t, r.err)
	assert.Equal(t, []string{"weather"}, r.cfg.Deny)
	assert.Equal(t, []string{"weather"}, r.cfg.RequireApproval)
	assert.Equal(t, []string{"weather", "read"}, r.cfg.Allow)
	assert.Equal(t, []string{"read", "weather"}, r.cfg.Tools)
	assertWarnings(t, r.warnings, "deny", 1, showList([]string{"weather"}))

	// Undeclared, the same file's host tool names are unknown names.
	opts.HostTools = nil
	r = loadOpts(t, opts)
	require.NoError(t, r.err)
	assert.Empty(t, r.cfg.Deny)
	assert.Equal(t, []string{"read"}, r.cfg.Allow)
}

// An MCP server's tools are known only once it has listed them: the
// loader keeps every name with a declared server prefix, and nothing but
// the prefix makes a name known.
func TestPolicyListsNameToolsByADeclaredPrefix(t *testing.T) {
	opts := Options{Env: []string{}, Cwd: t.TempDir(), HostToolPrefixes: []string{"fs_"},
		File: writeTOML(t, table(`deny = ["fs_write_file", "fs_", "fsx_read", "bash"]`+"\n"+`require_approval = ["fs_edit_file"]`))}
	r := loadOpts(t, opts)
	require.NoError(t, r.err)
	assert.Equal(t, []string{"fs_write_file"}, r.cfg.Deny, "the bare prefix and a longer server name are unknown names")
	assert.Equal(t, []string{"fs_edit_file"}, r.cfg.RequireApproval)
	assertWarnings(t, r.warnings, "deny", 1, showList([]string{"fs_write_file"}))
}
