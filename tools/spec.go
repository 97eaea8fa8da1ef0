package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Spec describes a host tool a script calls by a name of the host's
// choosing: the name of its python helper, the one line the model is shown,
// and the JSON Schema (an object schema) of its keyword arguments.
type Spec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Param is one keyword argument of a helper, taken from its schema.
type Param struct {
	Name     string
	Required bool
}

// ErrBadSpec is wrapped by every error Spec.Validate returns.
var ErrBadSpec = errors.New("invalid host tool spec")

// reserved are names a helper may not take: python's keywords and
// builtins (a helper would shadow them in every script), the shim's own
// helpers and the modules its globals hold.
var reserved = func() map[string]bool {
	m := map[string]bool{"match": true, "case": true, "type": true}
	for n := range keywords {
		m[n] = true
	}
	for _, group := range []string{
		// Builtins.
		"ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis EncodingWarning EnvironmentError Exception ExceptionGroup FileExistsError FileNotFoundError FloatingPointError FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError NameError NotADirectoryError NotImplemented NotImplementedError OSError OverflowError PendingDeprecationWarning PermissionError ProcessLookupError RecursionError ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning UserWarning ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod compile complex copyright credits delattr dict dir divmod enumerate eval exec exit filter float format frozenset getattr globals hasattr hash help hex id input int isinstance issubclass iter len license list locals map max memoryview min next object oct open ord pow print property quit range repr reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip",
		// The shim's helpers and the modules its functions use.
		"ToolError text notify batch io os select sys time",
	} {
		for _, n := range strings.Fields(group) {
			m[n] = true
		}
	}
	return m
}()

// keywords are python's hard keywords, which no name can be.
var keywords = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields("False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield") {
		m[n] = true
	}
	return m
}()

// UsableParam reports whether n can be a stub's keyword argument: any
// ASCII identifier but a keyword, a private name (the stub calls _call)
// or TypeError (the stub raises it). A builtin's name (type, id, format)
// is fine: it is shadowed only inside the stub, which does not use it.
func UsableParam(n string) bool {
	return identifier(n) && !keywords[n] && !strings.HasPrefix(n, "_") && n != "TypeError"
}

// identifier reports whether s is an ASCII python identifier. Non-ASCII
// identifiers are refused: python normalises them (NFKC), so two
// different names could bind the same helper.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c < unicode.MaxASCII && unicode.IsLetter(c):
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// Validate checks s as a host tool's spec. A built-in's name is allowed:
// the host's tool then replaces that helper. Every error wraps ErrBadSpec
// and names the bad input.
func (s Spec) Validate() error {
	_, err := s.Params()
	return err
}

// Params validates s and returns its keyword arguments: the required
// ones in the schema's "required" order, then the optional ones in
// ascending order, so equal specs give equal stubs.
func (s Spec) Params() ([]Param, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadSpec, s.Name, fmt.Sprintf(format, a...))
	}
	switch {
	case !identifier(s.Name):
		return nil, bad("the name must be an ASCII python identifier")
	case strings.HasPrefix(s.Name, "_"):
		return nil, bad("the name must not start with an underscore (the helper module's private names do)")
	case reserved[s.Name]:
		return nil, bad("the name would shadow the python keyword, builtin or helper %q", s.Name)
	case strings.TrimSpace(s.Description) == "":
		return nil, bad("the description is empty")
	case strings.ContainsAny(s.Description, "\r\n\u2028\u2029"):
		return nil, bad("the description must be one line")
	}
	var schema struct {
		Type       *string                    `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	dec := json.NewDecoder(bytes.NewReader(s.Parameters))
	if len(bytes.TrimSpace(s.Parameters)) == 0 {
		return nil, bad("the parameters schema is empty (want a JSON Schema object with \"type\": \"object\")")
	}
	if err := dec.Decode(&schema); err != nil {
		return nil, bad("the parameters schema is not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, bad("the parameters schema has data after its object")
	}
	if schema.Type == nil || *schema.Type != "object" {
		return nil, bad("the parameters schema must have \"type\": \"object\"")
	}
	if schema.Properties == nil {
		return nil, bad("the parameters schema must have \"properties\" (an object; {} for none)")
	}
	names := make([]string, 0, len(schema.Properties))
	for n := range schema.Properties {
		if !UsableParam(n) {
			return nil, bad("the parameter %q is not a usable python keyword argument (an ASCII identifier, not a keyword, not TypeError, no leading underscore)", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Param, 0, len(names))
	for _, n := range schema.Required {
		if _, ok := schema.Properties[n]; !ok {
			return nil, bad("the required parameter %q is not among the properties", n)
		}
		if slices.ContainsFunc(out, func(p Param) bool { return p.Name == n }) {
			return nil, bad("the required parameter %q is listed twice", n)
		}
		out = append(out, Param{Name: n, Required: true})
	}
	for _, n := range names {
		if !slices.Contains(schema.Required, n) {
			out = append(out, Param{Name: n})
		}
	}
	return out, nil
}

// Signature is the helper's call signature as the model is shown it,
// e.g. "weather(city, units=None)". s must be valid.
func (s Spec) Signature() string {
	ps, _ := s.Params()
	args := make([]string, len(ps))
	for i, p := range ps {
		args[i] = p.Name
		if !p.Required {
			args[i] += "=None"
		}
	}
	return s.Name + "(" + strings.Join(args, ", ") + ")"
}
