package mcpsource

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/executecode/executecode/tools"
)

// wholeArguments is the one keyword argument of a tool whose schema names
// no properties a keyword could stand for (a $ref, a oneOf, free-form
// additionalProperties): the script passes the arguments object itself.
const wholeArguments = "arguments"

// signature is how a script calls one MCP tool: its spec, and how the
// stub's keyword arguments map back onto the tool's arguments.
type signature struct {
	spec tools.Spec
	// params maps each keyword argument to the property it stands for.
	params map[string]string
	// whole says the one keyword argument is the arguments object.
	whole bool
}

// composite are the keywords with which a schema takes arguments that its
// properties do not name.
var composite = []string{"$ref", "allOf", "anyOf", "oneOf", "patternProperties", "additionalProperties", "dependentSchemas", "if"}

// signatureOf makes the spec of helper for an MCP tool with the given
// input schema (the SDK's decoding of it: a map, or anything a server
// sent). Each property becomes a keyword argument, renamed when its name
// cannot be one (paramName); its own schema is kept as it is, since the
// value is passed through to the server, which validates it (a nested
// object is a dict, a $ref'd type whatever the script builds). A schema
// with no properties but some other way to take arguments, or one that
// is not an object schema at all, gets the one keyword "arguments".
func signatureOf(helper, description string, schema any) (signature, error) {
	m, _ := schema.(map[string]any)
	var props map[string]any
	if m != nil {
		props, _ = m["properties"].(map[string]any)
	}
	if len(props) == 0 && (m == nil || slices.ContainsFunc(composite, func(k string) bool {
		v, ok := m[k]
		return ok && v != false
	})) {
		params := json.RawMessage(`{"type":"object","properties":{"` + wholeArguments +
			`":{"type":"object","description":"the tool's arguments object, passed as it is"}}}`)
		return finish(signature{spec: tools.Spec{Name: helper, Description: description, Parameters: params},
			params: map[string]string{wholeArguments: wholeArguments}, whole: true})
	}
	originals := slices.Sorted(maps.Keys(props))
	names := assign(originals, paramName, nil)
	renamed := make(map[string]any, len(props))
	params := make(map[string]string, len(props))
	for _, o := range originals {
		renamed[names[o]] = props[o]
		params[names[o]] = o
	}
	var required []string
	if m != nil {
		list, _ := m["required"].([]any)
		for _, r := range list {
			if s, ok := r.(string); ok {
				if n, ok := names[s]; ok && !slices.Contains(required, n) {
					// A required name the properties lack is the server's
					// to refuse; the stub cannot ask for it.
					required = append(required, n)
				}
			}
		}
	}
	out := map[string]any{"type": "object", "properties": renamed}
	if len(required) > 0 {
		out["required"] = required
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return signature{}, fmt.Errorf("tool %s: input schema: %w", helper, err)
	}
	return finish(signature{spec: tools.Spec{Name: helper, Description: description, Parameters: raw}, params: params})
}

// finish validates the spec a signature was given: after the renaming no
// server's schema should fail, so a failure is named and not hidden.
func finish(s signature) (signature, error) {
	if err := s.spec.Validate(); err != nil {
		return signature{}, err
	}
	return s, nil
}

// arguments maps a call's keyword arguments back onto the tool's: the
// original property names, or the arguments object itself.
func (s signature) arguments(params map[string]any) (map[string]any, error) {
	if s.whole {
		switch v := params[wholeArguments].(type) {
		case nil:
			return map[string]any{}, nil
		case map[string]any:
			return v, nil
		default:
			return nil, fmt.Errorf("%w: %s(): %s must be a dict", tools.ErrBadParam, s.spec.Name, wholeArguments)
		}
	}
	args := make(map[string]any, len(params))
	for k, v := range params {
		o, ok := s.params[k]
		if !ok {
			return nil, fmt.Errorf("%w: %s() got an unexpected keyword argument '%s'", tools.ErrBadParam, s.spec.Name, k)
		}
		args[o] = v
	}
	return args, nil
}
