package shimpy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

func TestImportLineListsEnabledStubsInFixedOrder(t *testing.T) {
	cases := []struct {
		name  string
		tools []string
		want  string
	}{
		{"read and ls", []string{"read", "ls"}, "from exec_tools import ToolError, read, ls, text, notify, batch"},
		{"config order ignored", []string{"ls", "read"}, "from exec_tools import ToolError, read, ls, text, notify, batch"},
		{"no helpers keeps the channels", nil, "from exec_tools import ToolError, text, notify, batch"},
		{"all, reversed", []string{"webfetch", "ls", "find", "grep", "read"}, "from exec_tools import ToolError, read, grep, find, ls, webfetch, text, notify, batch"},
		{"duplicates once", []string{"grep", "grep", "webfetch", "grep"}, "from exec_tools import ToolError, grep, webfetch, text, notify, batch"},
		{"unknown names ignored", []string{"bash", "read", "execute_code"}, "from exec_tools import ToolError, read, text, notify, batch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, importLine(tc.tools, nil))
		})
	}
}

func TestRenderScriptInjectsExactlyOneLine(t *testing.T) {
	for _, script := range []string{"", "print(1)", "x = 1\ny = 2\n", "\n\n\n", "a\r\nb"} {
		got := RenderScript(script, []string{"read"})
		first, rest, found := strings.Cut(got, "\n")
		require.True(t, found)
		assert.Equal(t, importLine([]string{"read"}, nil), first)
		assert.Equal(t, script, rest)
		assert.Equal(t, strings.Count(script, "\n")+1, strings.Count(got, "\n"))
	}
}

func TestRenderModuleEmitsStubsInFixedOrderRegardlessOfConfigOrder(t *testing.T) {
	want := RenderModule([]string{"read", "grep", "find", "ls", "webfetch"}, 0)
	for _, tools := range [][]string{
		{"webfetch", "ls", "find", "grep", "read"},
		{"ls", "read", "webfetch", "grep", "find", "read"},
	} {
		assert.Equal(t, want, RenderModule(tools, 0), "tools %v", tools)
	}
	last := -1
	for _, name := range allTools {
		i := strings.Index(want, "\ndef "+name+"(")
		require.Greater(t, i, last, "stub %s out of order", name)
		last = i
	}
}

func TestRenderModuleOmitsDisabledStubs(t *testing.T) {
	module := RenderModule([]string{"ls", "read"}, 0)
	assert.Contains(t, module, "\ndef read(path, offset=None, limit=None):\n")
	assert.Contains(t, module, "\ndef ls(path=None, all=None, long=None, recursive=None, max_depth=None, max_entries=None):\n")
	for _, name := range []string{"grep", "find", "webfetch"} {
		assert.NotContains(t, module, "\ndef "+name+"(")
	}
}

func TestRenderModuleStubsHaveTheDocumentedSignatures(t *testing.T) {
	module := RenderModule(allTools, 0)
	for _, sig := range []string{
		"def read(path, offset=None, limit=None):",
		"def grep(pattern, path=None, glob=None, case_sensitive=None, literal=None, context_lines=None, max_results=None):",
		"def find(pattern, path=None, type=None, max_depth=None, max_results=None, hidden=None):",
		"def ls(path=None, all=None, long=None, recursive=None, max_depth=None, max_entries=None):",
		"def webfetch(url, extract_mode=None, max_chars=None):",
	} {
		assert.Contains(t, module, "\n"+sig+"\n")
	}
}

func TestRenderModuleIsUnconfigured(t *testing.T) {
	module := RenderModule(allTools, 0)
	assert.Contains(t, module, "\n_BRIDGE = None\n")
	assert.NotContains(t, module, "\n_configure(")
	assert.Contains(t, module, "\ndef _configure(rpc_dir, token, budget=None, generation=None, bells=None):\n")
}

func TestRenderModuleBakesTheTextBudget(t *testing.T) {
	cases := []struct {
		max  int
		want string
	}{
		{0, "\n_DEFAULT_TEXT_BUDGET = 65536\n"},
		{-7, "\n_DEFAULT_TEXT_BUDGET = 65536\n"},
		{64, "\n_DEFAULT_TEXT_BUDGET = 64\n"},
		{1 << 20, "\n_DEFAULT_TEXT_BUDGET = 1048576\n"},
	}
	for _, tc := range cases {
		assert.Contains(t, RenderModule(nil, tc.max), tc.want, "max %d", tc.max)
	}
}

func TestRenderModuleCarriesTheProtocolVersion(t *testing.T) {
	assert.Contains(t, RenderModule(nil, 0), "\n_PROTOCOL_VERSION = 1\n")
}

// The per-call prelude holds nothing of a run: the same text for every
// run of a helper set, ending in the one line that reads the run's
// configuration from the socket at tokenFD.
func TestRenderPreludeIsTheModuleConfiguredFromItsSocket(t *testing.T) {
	module := RenderModule([]string{"read", "ls"}, 64)
	assert.Equal(t, module+"\n\n_configure_inherited(5)\n", RenderPrelude(module, 5))
	assert.Contains(t, RenderPrelude(module, 3), "\n_DEFAULT_TEXT_BUDGET = 64\n", "the budget is the module's own")
}

func TestRenderingIsDeterministic(t *testing.T) {
	tools := []string{"webfetch", "read", "grep"}
	first := RenderPrelude(RenderModule(tools, 100), 5)
	for range 20 {
		assert.Equal(t, first, RenderPrelude(RenderModule(tools, 100), 5))
	}
	assert.Equal(t, RenderScript("x", tools), RenderScript("x", tools))
}

// What the host refuses to send is what the shim would refuse to read.
func TestARunConfigTheShimWouldRefuseIsNotSent(t *testing.T) {
	long := "/" + strings.Repeat("d", maxRunDir)
	for name, cfg := range map[string]RunConfig{
		"no token":       {Dir: "/d"},
		"NUL in token":   {Token: "a\x00b", Dir: "/d"},
		"space in token": {Token: "a b", Dir: "/d"},
		"token too long": {Token: strings.Repeat("t", maxRunToken+1), Dir: "/d"},
		"relative dir":   {Token: "t", Dir: "d"},
		"NUL in dir":     {Token: "t", Dir: "/d\x00e"},
		"dir too long":   {Token: "t", Dir: long},
		"bells below 3":  {Token: "t", Dir: "/d", Bells: &Bells{Request: 1, Response: 4}},
		"one bell twice": {Token: "t", Dir: "/d", Bells: &Bells{Request: 4, Response: 4}},
		"bell too high":  {Token: "t", Dir: "/d", Bells: &Bells{Request: 3, Response: 1000000}},
	} {
		f, err := RunSocket(cfg)
		assert.ErrorIs(t, err, ErrRunConfig, name)
		assert.Nil(t, f, name)
	}
	got, err := RunConfig{Token: "t", Dir: "/d\ne", Bells: &Bells{Request: 3, Response: 4}}.encode()
	require.NoError(t, err)
	assert.Equal(t, "exec_tools run 1\x00t\x00/d\ne\x003,4\x00", string(got))
}

func TestHostStubIsGeneratedFromItsSpec(t *testing.T) {
	spec := tools.Spec{Name: "weather", Description: `Weather "now" for a city.`,
		Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"units":{},"city":{},"days":{}}}`)}
	read := tools.Spec{Name: "read", Description: "The host's own read.", Parameters: json.RawMessage(`{"type":"object","properties":{"file":{}}}`)}
	specs := []tools.Spec{spec, read}
	assert.Equal(t, "from exec_tools import ToolError, read, ls, weather, text, notify, batch",
		importLine([]string{"weather", "ls", "read", "weather"}, specs))
	module := RenderModule([]string{"read", "weather"}, 0, specs...)
	assert.Contains(t, module, `def weather(city, days=None, units=None):
    "Weather \"now\" for a city."
    if city is None:
        raise TypeError("weather() missing required argument: 'city'")
    return _call("weather", {"city": city, "days": days, "units": units})`)
	assert.Contains(t, module, `def read(file=None):`, "a spec named after a built-in replaces its stub")
	assert.NotContains(t, module, "def read(path")
}
