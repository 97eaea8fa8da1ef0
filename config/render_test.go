package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTOMLRoundTripsThroughLoad(t *testing.T) {
	cwd := t.TempDir()
	cases := []struct {
		name string
		in   in
	}{
		{name: "defaults", in: in{}},
		{name: "everything set", in: in{toml: table(`enabled = true
python_path = "venv/bin/python3"
timeout_ms = 5000
max_rpc_calls = 7
max_rpc_result_bytes = 9999999999
max_output_bytes = 1234
max_text_bytes = 4321
max_parallel_rpc = 2
tools = ["ls", "read", "ls"]
kernel_mode = "session"
kernel_idle_timeout_ms = 60000
max_live_kernels = 3
max_queued_cells_per_kernel = 1
cpu_limit_seconds = 30
memory_limit_mb = 512
fsize_limit_mb = 0
nproc_limit = 50
sandbox = "landlock"
allow = ["read", "webfetch"]
deny = "grep"
require_approval = ["webfetch", "read", "webfetch"]
approval_timeout_ms = 1500
warm_interpreters = 0`)}},
		{name: "explicitly disabled", in: in{toml: table("enabled = false")}},
		{name: "no helpers", in: in{toml: table(`tools = ["bash"]`)}},
		{name: "allow of only unknown tools", in: in{env: []string{"LEMON_EXECUTE_CODE_ALLOW=bash,Read"}}},
		{name: "awkward python path", in: in{env: []string{"LEMON_EXECUTE_CODE_PYTHON_PATH=/opt/py \"quoted\" 'single' \\ é\ttab/python3"}}},
		{name: "clamped values", in: in{toml: table("timeout_ms = 0\nmax_rpc_calls = \"99999999999999999999\"")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.cwd = cwd
			first := load(t, tc.in)
			require.NoError(t, first.err)

			doc := first.cfg.TOML()
			assert.True(t, strings.HasPrefix(doc, "[runtime.tools.execute_code]\n"))
			for _, k := range keys {
				assert.Contains(t, doc, k.name+" = ", "every key is rendered")
			}

			again := load(t, in{toml: doc, cwd: cwd})
			require.NoError(t, again.err, "document:\n%s", doc)
			assert.Equal(t, first.cfg, again.cfg, "document:\n%s", doc)
			assert.Empty(t, again.warnings, "a rendered config loads without warnings")
		})
	}
}

func TestTOMLOrderIsStable(t *testing.T) {
	doc := Defaults().TOML()
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(doc), "\n")[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		order = append(order, name)
	}
	assert.Equal(t, Keys(), order)
	assert.Equal(t, doc, Defaults().TOML())
}

func TestTOMLLeavesAnUnsetEnabledUnset(t *testing.T) {
	c := Defaults()
	assert.Contains(t, c.TOML(), "# enabled = false")
	c.Enabled, c.EnabledExplicit = false, true
	assert.Contains(t, c.TOML(), "\nenabled = false\n")
}
