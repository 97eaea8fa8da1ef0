package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gatedRead = `
try:
    read("a.txt")
    text("ran")
except ToolError as e:
    text("ToolError: " + str(e))
`

func runJSON(t *testing.T, args ...string) (blocks []string, details map[string]any, code int) {
	t.Helper()
	root := t.TempDir()
	writeFile(t, root, "a.txt", "a\n")
	r := cli(t, gatedRead, nil, append([]string{"run", "--json", "--root", root}, append(args, "-")...)...)
	var res struct {
		Blocks  []string
		Details map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout+r.stderr)
	return res.Blocks, res.Details, r.code
}

func TestApproveDenyMakesTheHelperRaiseTheDenial(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.toml", `require_approval = ["read"]`)
	blocks, details, code := runJSON(t, "--config", cfg, "--approve", "deny")
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"ToolError: approval denied for 'read'"}, blocks)
	assert.Equal(t, 1.0, details["rpc_denied"])
	assert.Equal(t, 1.0, details["rpc_calls"])
}

func TestApproveAllowRunsTheGatedHelper(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.toml", `require_approval = ["read"]`)
	blocks, details, _ := runJSON(t, "--config", cfg, "--approve", "allow")
	assert.Equal(t, []string{"ran"}, blocks)
	assert.Equal(t, 0.0, details["rpc_denied"])
}

func TestPolicyDenialNeverPrompts(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.toml", "deny = [\"read\"]\nrequire_approval = [\"read\"]\n")
	blocks, details, _ := runJSON(t, "--config", cfg, "--approve", "allow")
	assert.Equal(t, []string{"ToolError: Tool 'read' is in deny list"}, blocks)
	assert.Equal(t, 1.0, details["rpc_denied"])
}

func TestServeAsksTheClientForApprovals(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.toml", `require_approval = ["ls"]`)
	p := startServe(t, "--config", cfg)
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.answer()
	p.send(`{"id":2,"op":"execute","session":"s","script":"text(ls('.'))"}`)
	prompt := p.answer()
	require.Contains(t, prompt, "approval", prompt)
	assert.Equal(t, 2.0, prompt["id"], "the prompt names the execute it belongs to")
	ap := prompt["approval"].(map[string]any)
	assert.Equal(t, "ls", ap["tool"])
	id := ap["approval_id"].(string)
	assert.Regexp(t, `^appr_`, id)

	p.send(`{"id":3,"op":"approve","approval_id":"` + id + `","decision":"allow"}`)
	got := map[float64]map[string]any{}
	for len(got) < 2 {
		a := p.answer()
		got[a["id"].(float64)] = a
	}
	assert.Equal(t, true, got[3]["ok"])
	details := got[2]["result"].(map[string]any)["details"].(map[string]any)
	assert.Equal(t, 0.0, details["rpc_denied"])
	assert.Equal(t, 1.0, details["rpc_calls"])

	p.send(`{"id":4,"op":"approve","approval_id":"` + id + `","decision":"approve_global"}`)
	assert.Contains(t, p.answer()["error"], "not_pending")
	p.send(`{"id":5,"op":"approve","approval_id":"x","decision":"maybe"}`)
	assert.Contains(t, p.answer()["error"], "decision")
}
