package mcpsource

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/mcptest"
	"github.com/executecode/executecode/tools"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

// Property names a keyword argument cannot carry are renamed, not
// refused, and map back to the server's names; nested and $ref'd
// schemas are passed through for the server to validate.
func TestSchemaPropertiesBecomeKeywordArgumentsThatMapBack(t *testing.T) {
	sig, err := signatureOf("t_weird", "Weird.", decode(t, mcptest.Weird))
	require.NoError(t, err)
	assert.Equal(t, "t_weird(from_, a_b_2, TypeError_=None, a_b=None, arg_1st=None, class_=None, filter=None, max_results=None, point=None, private=None)", sig.spec.Signature())
	args, err := sig.arguments(map[string]any{"from_": "x", "a_b_2": "hyphen", "a_b": "underscore", "class_": "c",
		"filter": map[string]any{"kind": "k"}, "point": map[string]any{"x": 1.0}, "private": "p", "arg_1st": "1", "TypeError_": "t", "max_results": 3.0})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"from": "x", "a-b": "hyphen", "a_b": "underscore", "class": "c",
		"filter": map[string]any{"kind": "k"}, "point": map[string]any{"x": 1.0}, "_private": "p", "1st": "1", "TypeError": "t", "max-results": 3.0}, args)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(sig.spec.Parameters, &schema))
	assert.Equal(t, map[string]any{"$ref": "#/$defs/point"}, schema["properties"].(map[string]any)["point"], "a property's own schema is kept")
}

func TestSchemasWithoutNamedPropertiesTakeTheArgumentsObject(t *testing.T) {
	for _, tc := range []struct {
		schema string
		sig    string
	}{
		{`{"type":"object","additionalProperties":true}`, "t_x(arguments=None)"},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, "t_x(arguments=None)"},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"type":"object"}}}`, "t_x(arguments=None)"},
		{`{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`, "t_x(arguments=None)"},
		{`"not a schema"`, "t_x(arguments=None)"},
		{`null`, "t_x(arguments=None)"},
		{`{"type":"object"}`, "t_x()"},
		{`{"type":"object","properties":{},"additionalProperties":false}`, "t_x()"},
		{`{"type":"object","properties":{"p":{}},"additionalProperties":true}`, "t_x(p=None)"},
		{`{"type":"object","properties":{"p":{}},"required":["p","p","missing",7]}`, "t_x(p)"},
	} {
		sig, err := signatureOf("t_x", "X.", decode(t, tc.schema))
		require.NoError(t, err, tc.schema)
		assert.Equal(t, tc.sig, sig.spec.Signature(), tc.schema)
	}
	sig, err := signatureOf("t_x", "X.", decode(t, `{"type":"object","additionalProperties":true}`))
	require.NoError(t, err)
	args, err := sig.arguments(map[string]any{"arguments": map[string]any{"any key": 1.0}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"any key": 1.0}, args)
	args, err = sig.arguments(map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, args, "no arguments is an empty object, never null")
	_, err = sig.arguments(map[string]any{"arguments": []any{1.0}})
	assert.ErrorIs(t, err, tools.ErrBadParam)
}
