package shimpy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/executecode/executecode/tools"
)

// ProtocolVersion numbers the bridge protocol the rendered shim speaks
// (file names, frame shapes, doorbells). The shim carries it as
// _PROTOCOL_VERSION.
const ProtocolVersion = 1

// ModuleName is the python module a script imports its helpers from; the
// rendered module is staged as ModuleName + ".py".
const ModuleName = "exec_tools"

// defaultTextBudget is the text() cap when the caller gives none
// (docs/protocol.md, Budgets).
const defaultTextBudget = 65536

// Bells are the child-side descriptors of the doorbell pipes: Request is
// the write end the shim rings after publishing a request or a
// notification, Response the read end the host rings after publishing a
// response. The per-call runner passes {3, 4}.
type Bells struct{ Request, Response int }

var (
	//go:embed exec_tools.py.tmpl
	moduleSource string
	//go:embed stubs.py.tmpl
	stubSource string

	templates = template.Must(template.Must(
		template.New("module").Parse(moduleSource)).
		New("stubs").Parse(stubSource))
)

// enabled returns the known helpers present in names: the built-ins in
// the allowlist's order whatever order the configuration lists them in,
// then the host tools of specs in their order, each once; unknown names are
// ignored because the host never serves them. A spec named after a
// built-in takes that built-in's place.
func enabled(names []string, specs []tools.Spec) []string {
	var out []string
	for _, name := range tools.Allowlist {
		if slices.Contains(names, name) {
			out = append(out, name)
		}
	}
	for _, s := range specs {
		if slices.Contains(names, s.Name) && !slices.Contains(out, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// hostStub is the data of the "host" template: a helper whose keyword
// arguments are the schema's properties, required ones first.
type hostStub struct {
	Name, Args, Doc, Dict string
	Required              []string
}

func newHostStub(s tools.Spec) hostStub {
	ps, err := s.Params()
	if err != nil {
		// The runtime validates every spec before rendering.
		panic(fmt.Sprintf("shimpy: render host tool: %v", err))
	}
	st := hostStub{Name: s.Name, Doc: quote(s.Description)}
	args, dict := make([]string, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		args[i] = p.Name
		if p.Required {
			st.Required = append(st.Required, p.Name)
		} else {
			args[i] += "=None"
		}
		dict[i] = quote(p.Name) + ": " + p.Name
	}
	st.Args, st.Dict = strings.Join(args, ", "), strings.Join(dict, ", ")
	return st
}

// stub renders the helper called name: the host's spec when there is
// one, else the built-in's own stub.
func stub(name string, specs []tools.Spec) string {
	for _, s := range specs {
		if s.Name == name {
			return execute("host", newHostStub(s))
		}
	}
	return execute(name, nil)
}

type moduleData struct {
	ProtocolVersion int
	TextBudget      int
}

func textBudget(maxTextBytes int) int {
	if maxTextBytes <= 0 {
		return defaultTextBudget
	}
	return maxTextBytes
}

// execute runs one embedded template. The templates and their data are
// fixed at build time, so a failure is a defect in this package, caught by
// its tests, never a runtime condition.
func execute(name string, data any) string {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("shimpy: render %s: %v", name, err))
	}
	return strings.TrimSpace(b.String())
}

// RenderModule returns the unconfigured module (_BRIDGE = None) with one
// stub per enabled helper in fixed order; a session kernel stages it once
// and configures it per cell. maxTextBytes <= 0 means 65536. specs are the
// host tools' specs, each already valid (tools.Spec.Validate).
func RenderModule(tools []string, maxTextBytes int, specs ...tools.Spec) string {
	parts := []string{execute("module", moduleData{
		ProtocolVersion: ProtocolVersion,
		TextBudget:      textBudget(maxTextBytes),
	})}
	for _, name := range enabled(tools, specs) {
		parts = append(parts, stub(name, specs))
	}
	return strings.Join(parts, "\n\n")
}

// RenderPrelude returns the module of every per-call run of a runtime:
// module, as RenderModule rendered it, with a last line that configures
// it from the socket inherited at tokenFD (RunSocket), which holds the
// run's token, rpc dir and bells. Nothing of a run is in its text, so the
// host can have its bytecode made ahead (proc.Command's Module) and every
// run imports it from there; the shim checks what the socket holds and
// stays unconfigured (its helpers say so) on anything but a whole,
// well-formed configuration.
func RenderPrelude(module string, tokenFD int) string {
	return fmt.Sprintf("%s\n\n_configure_inherited(%d)\n", module, tokenFD)
}

// quote renders s as a JSON string, which is also a python string literal:
// encoding/json emits only escapes python shares (\" \\ \n \uXXXX …), and
// escapes U+2028/U+2029, which would otherwise end a python line.
func quote(s string) string {
	out, err := json.Marshal(s)
	if err != nil {
		// Marshalling a string cannot fail.
		panic(fmt.Sprintf("shimpy: quote: %v", err))
	}
	return string(out)
}

// importLine is the one line injected before a script: the enabled stubs
// in fixed order between ToolError and the always-present channels.
func importLine(tools []string, specs []tools.Spec) string {
	names := append([]string{"ToolError"}, enabled(tools, specs)...)
	names = append(names, "text", "notify", "batch")
	return "from " + ModuleName + " import " + strings.Join(names, ", ")
}

// RenderScript prepends importLine to script: exactly one injected line,
// so traceback line numbers are offset by 1.
func RenderScript(script string, tools []string, specs ...tools.Spec) string {
	return importLine(tools, specs) + "\n" + script
}
