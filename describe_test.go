package executecode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// The model is shown a signature for every helper the configuration
// enables, in the configured order: a helper added to the allowlist must
// not appear as an empty entry in the description.
func TestDescriptionShowsASignatureForEveryEnabledHelper(t *testing.T) {
	cfg := config.Defaults()
	cfg.Tools = append([]string(nil), tools.Allowlist...)
	d := executecode.Description(cfg)
	const lead = "return their text output as a string: "
	i := strings.Index(d, lead)
	if !assert.GreaterOrEqual(t, i, 0, d) {
		return
	}
	list := d[i+len(lead):]
	list = list[:strings.Index(list, ". Failed calls raise ToolError.")]
	at := 0
	for _, name := range tools.Allowlist {
		j := strings.Index(list[at:], name+"(")
		if assert.GreaterOrEqual(t, j, 0, "signature of %s in %q", name, list) {
			at += j + len(name)
		}
	}
	assert.NotContains(t, list, ", ,")
	assert.False(t, strings.HasPrefix(list, ", ") || strings.HasSuffix(list, ", "), list)
}

// The description advertises exactly the helpers a script can reach: the
// configured built-ins the host's tool map serves, then the host tools
// with their signatures and descriptions.
func TestRuntimeDescriptionListsExactlyTheReachableHelpers(t *testing.T) {
	builtin, err := tools.Builtin(tools.Options{Root: t.TempDir()})
	assert.NoError(t, err)
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.Tools = []string{tools.Read, tools.Grep}
	newRT := func(opts ...executecode.Option) *executecode.Runtime {
		rt, err := executecode.New(cfg, append(opts, executecode.WithRoot(t.TempDir()))...)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, rt.Close(context.Background())) })
		return rt
	}
	rt := newRT(executecode.WithTools(map[string]tools.Tool{tools.Read: builtin[tools.Read], tools.Ls: builtin[tools.Ls]}))
	d := rt.Description()
	assert.Contains(t, d, "return their text output as a string: read(path, offset=None, limit=None). Failed calls raise ToolError.")
	for _, name := range []string{"grep(", "ls(", "find(", "webfetch("} {
		assert.NotContains(t, d, name, "only read is both configured and served")
	}

	rt = newRT(executecode.WithHostTool(weatherSpec, newWeather()))
	d = rt.Description()
	assert.Contains(t, d, ": read(path, offset=None, limit=None), grep(pattern, ")
	assert.Contains(t, d, ", weather(city, units=None). A host tool may instead return JSON, which arrives as a dict or list. weather: Current weather for a city. Failed calls raise ToolError.")
	assert.NotContains(t, d, "ls(")

	cfg.Tools = nil
	rt = newRT(executecode.WithHostTool(weatherSpec, newWeather()))
	assert.Contains(t, rt.Description(), "as a string: weather(city, units=None). A host tool may instead return JSON, which arrives as a dict or list. weather: Current weather for a city.")
}
