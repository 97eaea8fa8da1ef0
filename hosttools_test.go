package executecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// weatherSpec is the sample host tool: one required argument, one
// optional.
var weatherSpec = tools.Spec{
	Name:        "weather",
	Description: "Current weather for a city.",
	Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{
		"city":{"type":"string"},"units":{"type":"string","enum":["metric","imperial"]}}}`),
}

// hostTool records the parameters of every call and answers with reply.
type hostTool struct {
	name  string
	reply func(params map[string]any) (tools.Result, error)
	mu    sync.Mutex
	calls []map[string]any
}

func (h *hostTool) Name() string { return h.name }

func (h *hostTool) Execute(_ context.Context, params map[string]any) (tools.Result, error) {
	h.mu.Lock()
	h.calls = append(h.calls, params)
	h.mu.Unlock()
	return h.reply(params)
}

func (h *hostTool) seen() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.calls...)
}

func newWeather() *hostTool {
	return &hostTool{name: "weather", reply: func(p map[string]any) (tools.Result, error) {
		units, _ := p["units"].(string)
		if units == "" {
			units = "metric"
		}
		return tools.TextResult(fmt.Sprintf("%v: 4 degrees (%s)", p["city"], units)), nil
	}}
}

var modes = []config.Mode{config.PerCall, config.Session}

// hostRig is an enabled runtime in mode with the weather tool registered,
// and the owner a call of that mode runs under (nil per call).
func hostRig(t *testing.T, mode config.Mode, w *hostTool, tune ...rigOption) (*rig, *executecode.Owner) {
	t.Helper()
	tune = append([]rigOption{withCfg(func(c *config.Config) { c.KernelMode = mode }),
		withOption(executecode.WithHostTool(weatherSpec, w))}, tune...)
	r := newRig(t, tune...)
	var o *executecode.Owner
	if mode == config.Session {
		o = r.attach("host-tools")
	}
	return r, o
}

func TestHostToolIsCalledByItsOwnName(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := newWeather()
			r, o := hostRig(t, mode, w)
			writeFile(t, r.root, "city.txt", "Oslo")
			res := r.run(o, `text(weather(read("city.txt").split("\t")[-1].strip()))
text(weather(city="Bergen", units="imperial"))
text(weather.__doc__)
text(repr(batch([("weather", {"city": "Tromso"})])))`)
			assert.Equal(t, "Oslo: 4 degrees (metric)\nBergen: 4 degrees (imperial)\nCurrent weather for a city.\n['Tromso: 4 degrees (metric)']",
				strings.Join(res.Blocks, "\n"), res.Text())
			assert.Contains(t, res.Details.RPCTools, "weather")
			assert.Equal(t, []map[string]any{{"city": "Oslo"}, {"city": "Bergen", "units": "imperial"}}, w.seen()[:2])
		})
	}
}

func TestHostToolMissingRequiredArgumentFailsInPython(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := newWeather()
			r, o := hostRig(t, mode, w)
			res := r.run(o, `for f in (lambda: weather(), lambda: weather(city=None), lambda: weather(units="metric"),
          lambda: batch([("weather", {"units": "metric"})]), lambda: batch([("weather", {"city": "x", "wind": 1})])):
    try:
        f()
    except TypeError as e:
        text("TypeError: " + str(e))`)
			assert.Equal(t, []string{
				"TypeError: weather() missing 1 required positional argument: 'city'",
				"TypeError: weather() missing required argument: 'city'",
				"TypeError: weather() missing 1 required positional argument: 'city'",
				"TypeError: weather() missing 1 required positional argument: 'city'",
				"TypeError: weather() got an unexpected keyword argument 'wind'",
			}, res.Blocks, res.Text())
			assert.Empty(t, w.seen(), "no call may reach the host")
			assert.Zero(t, res.Details.RPCCalls)
		})
	}
}

func TestHostToolSpecIsValidated(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{}}`)
	for _, tc := range []struct {
		spec tools.Spec
		want string
	}{
		{tools.Spec{Name: "", Description: "d", Parameters: schema}, `"": the name must be an ASCII python identifier`},
		{tools.Spec{Name: "get-weather", Description: "d", Parameters: schema}, `"get-weather": the name must be an ASCII python identifier`},
		{tools.Spec{Name: "1st", Description: "d", Parameters: schema}, `"1st": the name must be`},
		{tools.Spec{Name: "wéather", Description: "d", Parameters: schema}, `"wéather": the name must be an ASCII`},
		{tools.Spec{Name: "_call", Description: "d", Parameters: schema}, `"_call": the name must not start with an underscore`},
		{tools.Spec{Name: "print", Description: "d", Parameters: schema}, `would shadow the python keyword, builtin or helper "print"`},
		{tools.Spec{Name: "lambda", Description: "d", Parameters: schema}, `"lambda"`},
		{tools.Spec{Name: "batch", Description: "d", Parameters: schema}, `helper "batch"`},
		{tools.Spec{Name: "ToolError", Description: "d", Parameters: schema}, `helper "ToolError"`},
		{tools.Spec{Name: "os", Description: "d", Parameters: schema}, `helper "os"`},
		{tools.Spec{Name: "w", Description: " ", Parameters: schema}, `"w": the description is empty`},
		{tools.Spec{Name: "w", Description: "one\ntwo", Parameters: schema}, `"w": the description must be one line`},
		{tools.Spec{Name: "w", Description: "d"}, `"w": the parameters schema is empty`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`[]`)}, `"w": the parameters schema is not a JSON object`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"string"}`)}, `must have "type": "object"`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}, `must have "properties"`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"a-b":{}}}`)}, `the parameter "a-b" is not a usable`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"class":{}}}`)}, `the parameter "class"`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"_x":{}}}`)}, `the parameter "_x"`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"TypeError":{}}}`)}, `the parameter "TypeError"`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{},"required":["q"]}`)}, `the required parameter "q" is not among the properties`},
		{tools.Spec{Name: "w", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{}} {}`)}, `data after its object`},
	} {
		t.Run(tc.spec.Name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Enabled = true
			_, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()), executecode.WithHostTool(tc.spec, newWeather()))
			require.ErrorIs(t, err, tools.ErrBadSpec)
			require.ErrorIs(t, err, executecode.ErrConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	cfg := config.Defaults()
	_, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()), executecode.WithHostTool(weatherSpec, nil))
	assert.ErrorIs(t, err, tools.ErrBadSpec)
	assert.ErrorContains(t, err, `"weather": the tool is nil`)
	_, err = executecode.New(cfg, executecode.WithRoot(t.TempDir()),
		executecode.WithHostTool(weatherSpec, newWeather()), executecode.WithHostTool(weatherSpec, newWeather()))
	assert.ErrorContains(t, err, `"weather": registered twice`)
}

// Policy, approvals, the byte budget and untrusted marking treat a host
// tool exactly as a built-in: by its name, its result's encoded size and
// its Untrusted flag.
func TestHostToolIsGovernedLikeABuiltin(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Run("deny", func(t *testing.T) {
				w := newWeather()
				r, o := hostRig(t, mode, w, withCfg(func(c *config.Config) { c.Deny = []string{"weather"} }))
				res := r.run(o, `try:
    weather("Oslo")
except ToolError as e:
    text("denied: " + str(e))
text(str(len(ls())))`)
				require.Len(t, res.Blocks, 2, res.Text())
				assert.Contains(t, res.Blocks[0], "denied: ")
				assert.Contains(t, res.Blocks[0], "weather")
				assert.Empty(t, w.seen())
				assert.Equal(t, 1, res.Details.RPCDenied)
			})
			t.Run("allow list narrows host tools too", func(t *testing.T) {
				w := newWeather()
				r, o := hostRig(t, mode, w, withCfg(func(c *config.Config) { c.Allow = []string{"read"} }))
				res := r.run(o, "try:\n    weather('Oslo')\nexcept ToolError as e:\n    text('denied')")
				assert.Equal(t, []string{"denied"}, res.Blocks, res.Text())
				assert.Empty(t, w.seen())
			})
			t.Run("approval", func(t *testing.T) {
				var asked []string
				var mu sync.Mutex
				approver := approval.ApproverFunc(func(_ context.Context, req approval.Request) (approval.Decision, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, fmt.Sprintf("%s %v", req.Tool, req.Args))
					return approval.Deny, nil
				})
				w := newWeather()
				r, o := hostRig(t, mode, w, withCfg(func(c *config.Config) { c.RequireApproval = []string{"weather"} }),
					withOption(executecode.WithApprover(approver)))
				res := r.run(o, "try:\n    weather('Oslo')\nexcept ToolError as e:\n    text('refused')")
				assert.Equal(t, []string{"refused"}, res.Blocks, res.Text())
				mu.Lock()
				assert.Equal(t, []string{"weather map[city:Oslo]"}, asked)
				mu.Unlock()
				assert.Empty(t, w.seen())
			})
			t.Run("budget", func(t *testing.T) {
				big := &hostTool{name: "weather", reply: func(map[string]any) (tools.Result, error) {
					return tools.TextResult(strings.Repeat("x", 600)), nil
				}}
				r, o := hostRig(t, mode, big, withCfg(func(c *config.Config) { c.MaxRPCResultBytes = 1000 }))
				res := r.run(o, `text(str(len(weather("a"))))
try:
    weather("b")
except ToolError as e:
    text("over: " + str(e))`)
				require.Len(t, res.Blocks, 2, res.Text())
				assert.Equal(t, "600", res.Blocks[0])
				assert.Contains(t, res.Blocks[1], "over: ")
				assert.Equal(t, int64(600), res.Details.RPCBytes)
				assert.Len(t, big.seen(), 2)
			})
			t.Run("untrusted", func(t *testing.T) {
				web := &hostTool{name: "weather", reply: func(map[string]any) (tools.Result, error) {
					r := tools.TextResult("from the web")
					r.Untrusted = true
					return r, nil
				}}
				r, o := hostRig(t, mode, web)
				res := r.run(o, `text(weather("a"))`)
				assert.Equal(t, executecode.Untrusted, res.Trust)
			})
		})
	}
}

// No file can add a tool: a tools entry naming a tool the host did not
// register is dropped at load, and one in a hand-built Config is an error
// naming it. A registered host tool stays reachable whatever the list
// says of the built-ins.
func TestConfigCannotAddAHostTool(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "config.toml", "[runtime.tools.execute_code]\nenabled = true\nkernel_mode = \"per_call\"\ntools = [\"ls\", \"weather\"]\n")
	cfg, err := config.Load(config.Options{File: file, Env: []string{}, Cwd: dir})
	require.NoError(t, err)
	assert.Equal(t, []string{"ls"}, cfg.Tools)
	r := newRig(t, withCfg(func(c *config.Config) { *c = cfg }))
	res := r.run(nil, "try:\n    weather('Oslo')\nexcept NameError as e:\n    text(str(e))")
	assert.Equal(t, []string{"name 'weather' is not defined"}, res.Blocks, res.Text())

	w := newWeather()
	r = newRig(t, withCfg(func(c *config.Config) { *c = cfg }), withOption(executecode.WithHostTool(weatherSpec, w)))
	res = r.run(nil, "text(weather('Oslo'))\ntry:\n    read('x')\nexcept NameError as e:\n    text(str(e))")
	assert.Equal(t, []string{"Oslo: 4 degrees (metric)", "name 'read' is not defined"}, res.Blocks, res.Text())

	cfg.Tools = []string{"read", "weather"}
	_, err = executecode.New(cfg, executecode.WithRoot(dir))
	require.ErrorIs(t, err, executecode.ErrConfig)
	assert.ErrorContains(t, err, `tools: "weather" is neither a built-in nor a tool this host registered`)
}

// A kernel key carries the tool set's digest: a schema change alone gives
// a different key, and built-ins alone keep the reference's keys.
func TestToolSetDigestFollowsTheSchemas(t *testing.T) {
	cfg := config.Defaults()
	cfg.Enabled = true
	digest := func(opts ...executecode.Option) string {
		rt, err := executecode.New(cfg, append(opts, executecode.WithRoot(t.TempDir()))...)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, rt.Close(context.Background())) })
		return executecode.ToolSetDigest(rt)
	}
	days := weatherSpec
	days.Parameters = json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{},"days":{}}}`)
	a, b := digest(executecode.WithHostTool(weatherSpec, newWeather())), digest(executecode.WithHostTool(days, newWeather()))
	assert.NotEmpty(t, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, digest(executecode.WithHostTool(weatherSpec, newWeather())))
	assert.Empty(t, digest())
}

// A host tool may answer JSON: the script gets python values, and the
// budget counts the encoded document.
func TestHostToolJSONResultArrivesAsPythonValues(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			doc := map[string]any{"city": "Oslo", "temps": []int{4, 5}, "wind": nil, "note": "snø \u2028"}
			want, err := json.Marshal(doc)
			require.NoError(t, err)
			w := &hostTool{name: "weather", reply: func(p map[string]any) (tools.Result, error) {
				if p["city"] == "bad" {
					return tools.Result{Content: []tools.Content{{Type: tools.TypeJSON, Text: "{not json"}}}, nil
				}
				return tools.JSONResult(doc)
			}}
			r, o := hostRig(t, mode, w)
			res := r.run(o, `d = weather("Oslo")
text(type(d).__name__ + " " + type(d["temps"]).__name__ + " " + repr(d["temps"]) + " " + repr(d["wind"]) + " " + d["note"])
a, b = batch([("weather", {"city": "x"}), ("weather", {"city": "y"})])
text(repr(a == b == d))
try:
    weather("bad")
except ToolError as e:
    text(str(e))`)
			assert.Equal(t, []string{"dict list [4, 5] None snø \u2028", "True", "tool 'weather' returned a JSON result that does not parse"}, res.Blocks, res.Text())
			assert.Equal(t, int64(3*len(want)), res.Details.RPCBytes, "the budget counts the encoded document")
		})
	}
}

// A description is data, never code: quotes, backslashes, template
// braces and python escapes reach __doc__ verbatim.
func TestHostToolDescriptionIsQuotedIntoTheStub(t *testing.T) {
	nasty := weatherSpec
	nasty.Description = `Ends """ here \" \\ '''; {{.Name}} \x00 ` + "\u00e9 \t tab\"); import os; os._exit(3) #"
	w := newWeather()
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }), withOption(executecode.WithHostTool(nasty, w)))
	res := r.run(nil, "text(weather.__doc__)\ntext(weather('Oslo'))")
	assert.Equal(t, []string{nasty.Description, "Oslo: 4 degrees (metric)"}, res.Blocks, res.Text())
	assert.Contains(t, r.rt.Description(), "weather: "+nasty.Description+".")
}

// Schemas name their arguments freely: a builtin's or a helper's name is
// a fine keyword argument, shadowed only inside the stub.
func TestHostToolArgumentsMayBeNamedLikeBuiltins(t *testing.T) {
	spec := tools.Spec{Name: "lookup", Description: "Look a thing up.",
		Parameters: json.RawMessage(`{"type":"object","required":["type","id"],"properties":{"type":{},"id":{},"format":{},"text":{}}}`)}
	echo := &hostTool{name: "lookup", reply: func(p map[string]any) (tools.Result, error) { return tools.JSONResult(p) }}
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }), withOption(executecode.WithHostTool(spec, echo)))
	res := r.run(nil, "text(repr(sorted(lookup('user', 7, text='t').items())))\ntext(repr(type(1)))")
	assert.Equal(t, []string{"[('id', 7), ('text', 't'), ('type', 'user')]", "<class 'int'>"}, res.Blocks, res.Text())
	assert.Contains(t, r.rt.Description(), "lookup(type, id, format=None, text=None)")
}

// A script can publish a request without going through the stub: the
// host holds the call to the spec as well, and the tool never sees it.
func TestHostToolArgumentsAreCheckedOnTheHostToo(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := newWeather()
			r, o := hostRig(t, mode, w)
			res := r.run(o, `call = weather.__globals__["_call"]
for params in ({"units": "metric"}, {"city": "Oslo", "wind": 3}, {"city": None}):
    try:
        call("weather", params)
    except ToolError as e:
        text(str(e))`)
			assert.Equal(t, []string{
				"invalid parameter: weather() missing required argument: 'city'",
				"invalid parameter: weather() got an unexpected keyword argument 'wind'",
				"invalid parameter: weather() missing required argument: 'city'",
			}, res.Blocks, res.Text())
			assert.Empty(t, w.seen())
		})
	}
}

// JSON a host tool passes on from elsewhere may be hostile: nesting that
// Go accepts (up to 10,000 levels) but python's decoder cannot is the
// call's ToolError, and the script goes on.
func TestHostToolDeeplyNestedJSONIsAToolError(t *testing.T) {
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	w := &hostTool{name: "weather", reply: func(map[string]any) (tools.Result, error) {
		return tools.Result{Content: []tools.Content{{Type: tools.TypeJSON, Text: deep}}}, nil
	}}
	r, o := hostRig(t, config.PerCall, w)
	res := r.run(o, "try:\n    weather('x')\nexcept ToolError as e:\n    text(str(e))\ntext('still running')")
	assert.Equal(t, []string{"tool weather returned JSON nested too deeply to decode", "still running"}, res.Blocks, res.Text())
}

// WithTools only replaces built-ins: a new name there has no schema to
// build a stub from, so New says where it belongs instead of leaving the
// script a NameError.
func TestWithToolsUnderANewNameIsRefusedNamingIt(t *testing.T) {
	cfg := config.Defaults()
	cfg.Enabled = true
	_, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()),
		executecode.WithTools(map[string]tools.Tool{"weather": newWeather()}))
	require.ErrorIs(t, err, executecode.ErrConfig)
	assert.ErrorContains(t, err, `WithTools: "weather" is not a built-in helper; register a tool under a new name with WithHostTool`)
}

// BenchmarkHostToolVersusBuiltin times 100 calls in one per-call run,
// from inside python: the built-in ls, a host tool answering text and
// one answering JSON (the stub and the decoding are what differ).
func BenchmarkHostToolVersusBuiltin(b *testing.B) {
	jsonTool := &hostTool{name: "weather", reply: func(p map[string]any) (tools.Result, error) {
		return tools.JSONResult(map[string]any{"city": p["city"], "temps": []int{1, 2, 3}})
	}}
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.KernelMode = config.PerCall
	measure := func(w *hostTool, call string) float64 {
		rt, err := executecode.New(cfg, executecode.WithRoot(b.TempDir()), executecode.WithTmpDir(b.TempDir()),
			executecode.WithHostTool(weatherSpec, w))
		require.NoError(b, err)
		defer func() { require.NoError(b, rt.Close(context.Background())) }()
		res, err := rt.Execute(context.Background(), executecode.Call{Script: `import time
t = time.perf_counter()
for _ in range(100):
    ` + call + `
text(str((time.perf_counter() - t) / 100 * 1e6))`})
		require.NoError(b, err)
		require.Len(b, res.Blocks, 1, res.Text())
		var us float64
		_, err = fmt.Sscan(res.Blocks[0], &us)
		require.NoError(b, err)
		return us
	}
	for b.Loop() {
		b.ReportMetric(measure(newWeather(), "ls()"), "builtin-ls-us/call")
		b.ReportMetric(measure(newWeather(), "weather('Oslo')"), "host-text-us/call")
		b.ReportMetric(measure(jsonTool, "weather('Oslo')"), "host-json-us/call")
	}
}

// An operator's file can deny a host tool by name once the host declares
// its tools to the loader (config.Options.HostTools); undeclared, the
// name is an unknown one and dropped with a warning, as any typo is.
func TestAConfigFileDeniesAHostToolTheHostDeclared(t *testing.T) {
	file := writeFile(t, t.TempDir(), "execute-code.toml", "[runtime.tools.execute_code]\ndeny = [\"weather\"]\n")
	loaded, err := config.Load(config.Options{File: file, Env: []string{}, HostTools: []string{weatherSpec.Name}})
	require.NoError(t, err)
	require.Equal(t, []string{"weather"}, loaded.Deny)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			w := newWeather()
			r, o := hostRig(t, mode, w, withCfg(func(c *config.Config) { c.Deny = loaded.Deny }))
			res := r.run(o, "try:\n    weather('Oslo')\nexcept ToolError as e:\n    text(str(e))\n")
			require.Len(t, res.Blocks, 1, res.Text())
			assert.Contains(t, res.Blocks[0], "weather")
			assert.Equal(t, 1, res.Details.RPCDenied)
			assert.Empty(t, w.seen(), "a denied call never reaches the tool")
		})
	}
}
