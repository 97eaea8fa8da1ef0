package shimpy

import (
	"encoding/json"
	"fmt"
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

func TestRenderPreludeConfiguresTheDirOnceAndReadsTheTokenFromItsSocket(t *testing.T) {
	dir := "/tmp/private/exec-code-AbCdEfGhIj/rpc-KlMnOpQrSt"
	prelude := RenderPrelude(dir, 5, []string{"read", "ls"}, 0, nil)
	module := RenderModule([]string{"read", "ls"}, 0)
	assert.Equal(t, module+"\n\n_configure(\""+dir+"\", _inherited_token(5), 65536)\n", prelude)
	assert.Equal(t, 1, strings.Count(prelude, dir))
}

func TestRenderPreludePassesTheBudget(t *testing.T) {
	prelude := RenderPrelude("/d", 3, nil, 64, nil)
	assert.True(t, strings.HasSuffix(prelude, "\n\n_configure(\"/d\", _inherited_token(3), 64)\n"), prelude[len(prelude)-80:])
}

func TestRenderPreludeRendersBells(t *testing.T) {
	cases := []struct {
		bells *Bells
		want  string
	}{
		{nil, "\n\n_configure(\"/d\", _inherited_token(3), 65536)\n"},
		{&Bells{Request: 3, Response: 4}, "\n\n_configure(\"/d\", _inherited_token(3), 65536, bells=(3, 4))\n"},
		{&Bells{Request: 9, Response: 12}, "\n\n_configure(\"/d\", _inherited_token(3), 65536, bells=(9, 12))\n"},
	}
	for _, tc := range cases {
		got := RenderPrelude("/d", 3, nil, 0, tc.bells)
		assert.True(t, strings.HasSuffix(got, tc.want), "got tail %q", got[len(got)-60:])
	}
}

func TestRenderPreludeEscapesTheDirAsAOneLineLiteral(t *testing.T) {
	dir := "/tmp/a \"quoted\" \\ back\nslash <&> \u2028\u2029 é\x01"
	prelude := RenderPrelude(dir, 5, nil, 0, nil)
	line := prelude[strings.LastIndex(strings.TrimSuffix(prelude, "\n"), "\n")+1:]
	require.True(t, strings.HasPrefix(line, "_configure("), line)
	assert.NotContains(t, strings.TrimSuffix(line, "\n"), "\n")
	assert.NotContains(t, line, "\u2028")
	assert.NotContains(t, line, "\u2029")
	assert.Equal(t, dir, configureDir(t, prelude, 5))
}

func TestRenderingIsDeterministic(t *testing.T) {
	tools := []string{"webfetch", "read", "grep"}
	bells := &Bells{Request: 3, Response: 4}
	first := RenderPrelude("/d", 5, tools, 100, bells)
	for range 20 {
		assert.Equal(t, first, RenderPrelude("/d", 5, tools, 100, bells))
	}
	assert.Equal(t, RenderModule(tools, 100), RenderModule(tools, 100))
	assert.Equal(t, RenderScript("x", tools), RenderScript("x", tools))
}

// configureDir decodes the dir string literal of the prelude's final
// _configure line, which must go on to read the token from tokenFD.
func configureDir(t *testing.T, prelude string, tokenFD int) string {
	t.Helper()
	const marker = "\n\n_configure("
	i := strings.LastIndex(prelude, marker)
	require.GreaterOrEqual(t, i, 0)
	rest := prelude[i+len(marker):]
	dec := json.NewDecoder(strings.NewReader(rest))
	var dir string
	require.NoError(t, dec.Decode(&dir))
	want := fmt.Sprintf(", _inherited_token(%d), ", tokenFD)
	require.True(t, strings.HasPrefix(rest[dec.InputOffset():], want), rest[dec.InputOffset():])
	return dir
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
