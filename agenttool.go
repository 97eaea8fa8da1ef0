package executecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// AgentTool is execute_code as one tool of an agent framework: the shape
// that langchaingo's tools.Tool has as it is, and that eino's
// InvokableTool or an OpenAI-style function definition takes with a
// wrapper of a few lines (see the examples). Its calls belong to the
// owner it was made for, or run per call when that is nil.
type AgentTool struct {
	rt    *Runtime
	owner *Owner
}

// Tool returns execute_code as a tool value whose calls run for owner (nil:
// no session; each call runs in a fresh interpreter).
func (r *Runtime) Tool(owner *Owner) *AgentTool { return &AgentTool{rt: r, owner: owner} }

// Name is the tool's name, execute_code.
func (t *AgentTool) Name() string { return ToolName }

// Description is what the model is shown about the tool and its helpers.
func (t *AgentTool) Description() string { return t.rt.Description() }

// ParametersJSON is the JSON Schema of the tool's arguments.
func (t *AgentTool) ParametersJSON() json.RawMessage {
	b, err := json.Marshal(Parameters())
	if err != nil {
		// Parameters is a literal of maps, strings and slices: it always
		// encodes.
		panic(fmt.Sprintf("execute_code parameters do not encode: %v", err))
	}
	return b
}

// ErrBadArguments reports tool arguments that are neither a JSON object of
// the tool's parameters nor a script.
var ErrBadArguments = errors.New("execute_code arguments are not its parameters")

// Call runs one call and returns the text the model is shown. arguments
// is the tool's JSON arguments ({"script": ..., "timeout_ms": ...,
// "reset": ...}), or, as ReAct-style models send it, the bare script,
// optionally inside a Markdown code fence. The error is Execute's (a call
// that never ran, or a run the ctx ended), and the text is then still
// what the model would be told: a framework that turns tool errors into
// observations can pass it on.
func (t *AgentTool) Call(ctx context.Context, arguments string) (string, error) {
	params, err := toolParams(arguments)
	if err != nil {
		return ModelText(err), err
	}
	res, err := t.rt.ExecuteParams(ctx, params, nil, t.owner)
	return res.Text(), err
}

// toolParams reads a call's arguments: a JSON object is the parameters;
// anything else is the script itself.
func toolParams(arguments string) (map[string]any, error) {
	trimmed := strings.TrimSpace(arguments)
	if strings.HasPrefix(trimmed, "{") {
		var params map[string]any
		if err := json.Unmarshal([]byte(trimmed), &params); err == nil {
			if _, ok := params["script"]; ok {
				return params, nil
			}
			return nil, fmt.Errorf("%w: it has no \"script\" field", ErrBadArguments)
		}
		// Not JSON: a script that begins with a dict or set literal.
	}
	return map[string]any{"script": unfence(arguments)}, nil
}

// unfence returns the code inside a Markdown code fence (``` or ~~~, with
// or without a language tag) when arguments is one fenced block and
// nothing else; otherwise arguments unchanged.
func unfence(arguments string) string {
	s := strings.TrimSpace(arguments)
	for _, fence := range []string{"```", "~~~"} {
		if !strings.HasPrefix(s, fence) || !strings.HasSuffix(s, fence) || len(s) < 2*len(fence) {
			continue
		}
		body := s[len(fence) : len(s)-len(fence)]
		first, rest, ok := strings.Cut(body, "\n")
		if !ok {
			return arguments
		}
		// The opening line holds at most a language tag.
		if strings.ContainsAny(strings.TrimSpace(first), " \t(){}[]=:'\"") {
			return arguments
		}
		if strings.Contains(rest, fence) {
			return arguments // more than one block, or a fence inside the code
		}
		return rest
	}
	return arguments
}
