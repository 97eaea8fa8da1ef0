package executecode

import (
	"fmt"
	"slices"
	"strings"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// signatures are the helper stubs as the model sees them.
var signatures = map[string]string{
	tools.Read:     "read(path, offset=None, limit=None)",
	tools.Grep:     "grep(pattern, path=None, glob=None, case_sensitive=None, literal=None, context_lines=None, max_results=None)",
	tools.Find:     "find(pattern, path=None, type=None, max_depth=None, max_results=None, hidden=None)",
	tools.Ls:       "ls(path=None, all=None, long=None, recursive=None, max_depth=None, max_entries=None)",
	tools.Webfetch: "webfetch(url, extract_mode=None, max_chars=None)",
}

// Tool identity and parameter schema, as the model is shown them.
const (
	ToolName  = "execute_code"
	ToolLabel = "Execute Code"
)

// Description is the tool description for cfg with the built-in helpers
// it enables: the mode sentence, then the helper sentences, separated by
// one space. Equal configs give byte-identical descriptions, so prompt
// caches stay warm. Runtime.Description is the one for a runtime's
// reachable helpers, host tools included.
func Description(cfg config.Config) string { return describe(cfg, cfg.Tools, nil) }

// describe lists helpers in order; a helper with a spec is shown by its
// spec's signature, followed by one sentence of its description.
func describe(cfg config.Config, helpers []string, specs []tools.Spec) string {
	var b strings.Builder
	b.WriteString("Run a python3 script for multi-step exploration. ")
	if cfg.KernelMode == config.Session {
		b.WriteString("Kernel mode: session — this workspace keeps a persistent python3 interpreter, so imports, globals, and objects survive across calls; pass reset=true to discard retained state before a run.")
	} else {
		b.WriteString("Kernel mode: per_call — each script runs in a fresh python3 process and nothing survives across calls; reset is accepted but has no effect.")
	}
	b.WriteString(" ")
	if len(helpers) == 0 {
		b.WriteString("No agent-tool helper functions are enabled for this workspace, so the script runs standalone.")
	} else {
		sigs := make([]string, 0, len(helpers))
		var about []string
		for _, t := range helpers {
			i := slices.IndexFunc(specs, func(s tools.Spec) bool { return s.Name == t })
			if i < 0 {
				sigs = append(sigs, signatures[t])
				continue
			}
			sigs = append(sigs, specs[i].Signature())
			about = append(about, t+": "+fullStop(specs[i].Description))
		}
		b.WriteString("The script can call these pre-imported helper functions, which invoke the corresponding agent tools and return their text output as a string: ")
		b.WriteString(strings.Join(sigs, ", "))
		b.WriteString(".")
		if len(about) > 0 {
			b.WriteString(" A host tool may instead return JSON, which arrives as a dict or list.")
		}
		for _, a := range about {
			b.WriteString(" " + a)
		}
		b.WriteString(" Failed calls raise ToolError.")
	}
	b.WriteString(" The script also has text(s), which appends a numbered block to the tool result (its total bytes are capped; blocks are flushed per call, so they survive a timeout), notify(msg), which streams a progress line to the conversation without waiting, and batch([(tool, params), ...]), which runs several helper calls in parallel and returns their results in order.")
	b.WriteString(" Build the answer with text(): only the text() blocks are the result, while everything the script prints to stdout/stderr is appended as a clearly labeled diagnostics tail — a script that never calls text() keeps the historic stdout-only result.")
	fmt.Fprintf(&b, " Limits: %d ms wall time, %d tool calls with at most %d dispatched in parallel, %d total tool-result bytes, text() blocks capped at %d bytes, stdout capped at %d bytes.",
		cfg.TimeoutMS, cfg.MaxRPCCalls, cfg.MaxParallelRPC, cfg.MaxRPCResultBytes, cfg.MaxTextBytes, cfg.MaxOutputBytes)
	b.WriteString(" The script cannot import the runtime's internals beyond these helpers; traceback line numbers are offset by 1. Requires python3 on the host.")
	return b.String()
}

// fullStop ends a host tool's one-line description with a full stop, so
// the next sentence of the description starts clearly.
func fullStop(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// Parameters is the JSON schema of the tool's input (script, timeout_ms,
// reset).
func Parameters() map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []string{"script"},
		"properties": map[string]any{
			"script": map[string]any{
				"type":        "string",
				"description": "The python3 script to run. Call text() to append blocks to the tool result; anything the script prints to stdout/stderr is returned only as a labeled diagnostics tail.",
			},
			"timeout_ms": map[string]any{
				"type":        "integer",
				"description": "Optional end-to-end wall-time cap in ms for this run, including session queue wait (clamped to the configured maximum).",
			},
			"reset": map[string]any{
				"type":        "boolean",
				"default":     false,
				"description": "Optional. Discard any retained interpreter state (imports, globals, objects) before running this script. No effect when every script already runs in a fresh process.",
			},
		},
	}
}
