package executecode_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// The tool value takes what models send: the JSON arguments, a bare
// script, or one fenced block; a script that merely begins with a dict
// literal is a script.
func TestAgentToolCallAcceptsJSONArgumentsOrAScript(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	tool := r.rt.Tool(nil)
	for name, args := range map[string]string{
		"json":          `{"script": "text('ok')", "timeout_ms": 5000}`,
		"bare":          "text('ok')",
		"fenced python": "```python\ntext('ok')\n```",
		"fenced plain":  "  ```\ntext('ok')\n```\n",
		"tilde fence":   "~~~py\ntext('ok')\n~~~",
		"dict literal":  "{'a': 1}\ntext('ok')",
	} {
		out, err := tool.Call(context.Background(), args)
		require.NoError(t, err, name)
		assert.Contains(t, out, "Script result (text()):\nok\n", name)
	}
}

// JSON without a script names what is missing; a fence the model wrote
// inside its code is left alone, so the script fails as written rather
// than being cut.
func TestAgentToolCallRefusesArgumentsWithoutAScript(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	tool := r.rt.Tool(nil)
	text, err := tool.Call(context.Background(), `{"code": "text('x')"}`)
	require.ErrorIs(t, err, executecode.ErrBadArguments)
	assert.Contains(t, err.Error(), `"script"`)
	assert.Contains(t, text, `"script"`, "the model is told too")
	text, err = tool.Call(context.Background(), `{"script": ""}`)
	assert.ErrorIs(t, err, executecode.ErrMissingScript)
	assert.Equal(t, executecode.ModelText(err), text)

	out, err := tool.Call(context.Background(), "```python\nprint('a')\n```\n```python\nprint('b')\n```")
	require.NoError(t, err)
	assert.Contains(t, out, "SyntaxError")
}

// The tool value describes itself as the runtime does, and its schema is
// the tool's parameters.
func TestAgentToolDescribesItself(t *testing.T) {
	r := newRig(t)
	tool := r.rt.Tool(nil)
	assert.Equal(t, executecode.ToolName, tool.Name())
	assert.Equal(t, r.rt.Description(), tool.Description())
	var schema map[string]any
	require.NoError(t, json.Unmarshal(tool.ParametersJSON(), &schema))
	props, _ := schema["properties"].(map[string]any)
	assert.Contains(t, props, "script")
}

// A tool value made for an owner runs its calls as that owner's cells:
// state persists from one call to the next.
func TestAgentToolForAnOwnerKeepsState(t *testing.T) {
	r := newRig(t)
	tool := r.rt.Tool(r.attach("s1"))
	_, err := tool.Call(context.Background(), "x = 41")
	require.NoError(t, err)
	out, err := tool.Call(context.Background(), "text(str(x + 1))")
	require.NoError(t, err)
	assert.Contains(t, out, "Script result (text()):\n42\n")
}

// A call whose ctx is already done never runs: the ctx's error, as from
// Execute, and the text says the script was cancelled.
func TestAgentToolCallWithADoneContext(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	text, err := r.rt.Tool(nil).Call(ctx, "text('never')")
	require.ErrorIs(t, err, context.Canceled)
	assert.NotContains(t, text, "never")
	assert.NotEmpty(t, text)
}
