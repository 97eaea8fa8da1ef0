package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// The built-in helpers' names: the one spelling of each, used by the
// configuration, the shim's stubs, the tool description, the pump and
// telemetry alike. They are untyped so that they fit every place a name
// travels as a string (Tool.Name, config lists, map keys, JSON).
const (
	Read     = "read"
	Grep     = "grep"
	Find     = "find"
	Ls       = "ls"
	Webfetch = "webfetch"
)

// Allowlist is the fixed, compile-time set of helpers a script may call, in
// the order stubs are emitted: the one ordered list of the names above.
// Configuration can only narrow it.
var Allowlist = []string{Read, Grep, Find, Ls, Webfetch}

// Content is one block of a tool result. Type is "text" for text blocks
// and TypeJSON for a JSON document in Text: a result of exactly one JSON
// block reaches the script decoded (a dict, a list, a scalar), one among
// others as its text. Any other type is shown to scripts as
// "[non-text content omitted]".
type Content struct {
	Type string
	Text string
}

// Result is what a tool returns to a helper call.
type Result struct {
	Content []Content
	// Untrusted marks content that came from outside the host (web pages):
	// a run that accepted such a result is reported untrusted.
	Untrusted bool
}

// TypeJSON is the Content type of a JSON block.
const TypeJSON = "json"

// JSONResult is a Result holding v encoded as one JSON block, which the
// script receives as python values and the byte budget counts at its
// encoded size.
func JSONResult(v any) (Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Result{}, fmt.Errorf("json result: %w", err)
	}
	return Result{Content: []Content{{Type: TypeJSON, Text: string(b)}}}, nil
}

// UntrustedError is a tool error whose message came from outside the
// host (an untrusted MCP server's own words): a run whose script was
// given it is reported untrusted, as for an untrusted Result.
type UntrustedError struct{ Err error }

func (e *UntrustedError) Error() string { return e.Err.Error() }
func (e *UntrustedError) Unwrap() error { return e.Err }

// TextResult is a Result holding one text block.
func TextResult(s string) Result { return Result{Content: []Content{{Type: "text", Text: s}}} }

// Tool is a helper the bridge can dispatch to. Params are the helper's
// keyword arguments as decoded from JSON (numbers are float64). An error's
// message is what the script's ToolError carries, so it must name the bad
// input and never contain host paths outside the tool root.
type Tool interface {
	Name() string
	Execute(ctx context.Context, params map[string]any) (Result, error)
}

// Sentinel errors tools wrap so callers (and tests) can branch on the cause.
var (
	ErrBadParam   = errors.New("invalid parameter")
	ErrNotFound   = errors.New("no such file or directory")
	ErrEscapes    = errors.New("path escapes the tool root")
	ErrBinary     = errors.New("binary file")
	ErrNotAllowed = errors.New("not allowed")
	// ErrNotRegular refuses to read a FIFO, a socket or a device: reading
	// one could block for ever (a FIFO nobody writes) or never end.
	ErrNotRegular = errors.New("not a regular file")
)
