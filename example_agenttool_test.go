package executecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// langchainTool is the method set of langchaingo's tools.Tool.
type langchainTool interface {
	Name() string
	Description() string
	Call(ctx context.Context, input string) (string, error)
}

// einoTool has the run method of eino's InvokableTool (its options are
// eino's own type there).
type einoTool struct{ *executecode.AgentTool }

func (t einoTool) InvokableRun(ctx context.Context, argumentsInJSON string, _ ...any) (string, error) {
	return t.Call(ctx, argumentsInJSON)
}

// An agent framework takes the tool value as it is (langchaingo's
// method set) or through a wrapper of three lines (eino's); an
// OpenAI-style function definition is its three parts. The model may send
// the JSON arguments or a bare script in a Markdown fence.
func ExampleRuntime_Tool() {
	root, _ := os.MkdirTemp("", "example-root")
	defer os.RemoveAll(root)
	cfg := config.Defaults()
	cfg.Enabled = true
	rt, err := executecode.New(cfg, executecode.WithRoot(root))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(context.Background())

	var tool langchainTool = rt.Tool(nil)
	out, err := tool.Call(context.Background(), "```python\ntext('hello from a fenced script')\n```")
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(out)

	out, err = einoTool{rt.Tool(nil)}.InvokableRun(context.Background(), `{"script": "text(str(6 * 7))"}`)
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(out)

	t := rt.Tool(nil)
	function := map[string]any{"name": t.Name(), "description": t.Description(), "parameters": t.ParametersJSON()}
	def, _ := json.Marshal(map[string]any{"type": "function", "function": function})
	fmt.Println(json.Valid(def), t.Name())
	// Output:
	// Script result (text()):
	// hello from a fenced script
	//
	// Diagnostics (stdout/stderr, not the result):
	// (script produced no output)
	// Script result (text()):
	// 42
	//
	// Diagnostics (stdout/stderr, not the result):
	// (script produced no output)
	// true execute_code
}
