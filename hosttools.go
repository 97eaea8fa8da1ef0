package executecode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// hostTool is one tool registered with WithHostTool.
type hostTool struct {
	spec tools.Spec
	tool tools.Tool
}

// WithHostTool registers a tool under a name of the host's choosing: the
// script calls it as spec.Name(...) with the keyword arguments of
// spec.Parameters, and the model sees its signature and description. A
// spec named after a built-in replaces that helper. It adds to the
// built-ins (or to the map of WithTools); configuration cannot add a tool,
// and policy, approvals, budgets and untrusted marking apply to it as to
// the built-ins. New reports a bad spec, wrapping tools.ErrBadSpec.
func WithHostTool(spec tools.Spec, t tools.Tool) Option {
	return func(r *Runtime) { r.host = append(r.host, hostTool{spec: spec, tool: t}) }
}

// addHostTools validates the host tools and works out the reachable
// helpers: the configured built-ins the tool map serves, in allowlist
// order, then the host tools in registration order. A host tool named
// after a built-in takes its place and, like it, needs the configuration
// to enable it.
func (r *Runtime) addHostTools() error {
	for _, name := range slices.Sorted(maps.Keys(r.tools)) {
		if !slices.Contains(tools.Allowlist, name) {
			return fmt.Errorf("WithTools: %q is not a built-in helper; register a tool under a new name with WithHostTool, whose spec gives the script its signature", name)
		}
	}
	r.tools = maps.Clone(r.tools)
	for _, h := range r.host {
		if err := h.spec.Validate(); err != nil {
			return err
		}
		if h.tool == nil {
			return fmt.Errorf("%w %q: the tool is nil", tools.ErrBadSpec, h.spec.Name)
		}
		if slices.ContainsFunc(r.specs, func(s tools.Spec) bool { return s.Name == h.spec.Name }) {
			return fmt.Errorf("%w %q: registered twice", tools.ErrBadSpec, h.spec.Name)
		}
		params, _ := h.spec.Params()
		r.specs = append(r.specs, h.spec)
		r.tools[h.spec.Name] = checkedTool{Tool: h.tool, name: h.spec.Name, params: params}
	}
	for _, name := range r.cfg.Tools {
		if _, ok := r.tools[name]; !ok && r.mcpPrefixed(name) {
			// What a server lists is the server's: a name that could only
			// be checked against its list is dropped as a file's unknown
			// name is.
			r.log.Warn().Str("key", "tools").Str("tool", name).Msg("execute_code tools names no tool of its MCP server")
			continue
		}
		if _, ok := r.tools[name]; !ok && name != config.NoTools && !slices.Contains(tools.Allowlist, name) {
			// Only a hand-built Config can get here (Load drops unknown
			// names): a tools entry enables, it never registers.
			return fmt.Errorf("tools: %q is neither a built-in nor a tool this host registered (WithHostTool)", name)
		}
	}
	r.helpers = nil
	for _, name := range tools.Allowlist {
		if _, ok := r.tools[name]; ok && slices.Contains(r.cfg.Tools, name) {
			r.helpers = append(r.helpers, name)
		}
	}
	for _, s := range r.specs {
		if !slices.Contains(tools.Allowlist, s.Name) {
			r.helpers = append(r.helpers, s.Name)
		}
	}
	r.toolsDigest = toolSetDigest(r.helpers, r.specs)
	r.warnUnknownPolicyNames()
	return nil
}

// warnUnknownPolicyNames logs each policy name that names no tool of this
// runtime: the configuration keeps names a host tool could have, and only
// here is the set of tools known. Such a name restricts nothing (and an
// allow list of only such names allows nothing).
func (r *Runtime) warnUnknownPolicyNames() {
	for _, list := range []struct {
		key   string
		names []string
	}{{"allow", r.cfg.Allow}, {"deny", r.cfg.Deny}, {"require_approval", r.cfg.RequireApproval}} {
		for _, n := range list.names {
			if _, ok := r.tools[n]; !ok && n != config.NoTools && !slices.Contains(tools.Allowlist, n) {
				r.log.Warn().Str("key", list.key).Str("tool", n).Msg("execute_code policy names no tool of this runtime")
			}
		}
	}
}

// checkedTool holds a host tool to its spec on the host side too: the
// stub checks the arguments in python, but a script can publish a request
// without the stub, so a call missing a required argument or carrying one
// the schema does not name never reaches the tool.
type checkedTool struct {
	tools.Tool
	name   string
	params []tools.Param
}

func (c checkedTool) Execute(ctx context.Context, params map[string]any) (tools.Result, error) {
	for _, p := range c.params {
		if v, ok := params[p.Name]; p.Required && (!ok || v == nil) {
			return tools.Result{}, fmt.Errorf("%w: %s() missing required argument: '%s'", tools.ErrBadParam, c.name, p.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !slices.ContainsFunc(c.params, func(p tools.Param) bool { return p.Name == k }) {
			return tools.Result{}, fmt.Errorf("%w: %s() got an unexpected keyword argument '%s'", tools.ErrBadParam, c.name, k)
		}
	}
	return c.Tool.Execute(ctx, params)
}

// toolSetDigest identifies the reachable helpers and the host tools'
// specs, so a session kernel staged with one tool set is never handed a
// call that expects another. With no host tools the helper names (in
// the key already) say it all, and it is "".
func toolSetDigest(helpers []string, specs []tools.Spec) string {
	if len(specs) == 0 {
		return ""
	}
	var b strings.Builder
	field := func(s string) { b.WriteString(strconv.Itoa(len(s)) + ":" + s) }
	for _, h := range helpers {
		field(h)
	}
	for _, s := range specs {
		field(s.Name)
		field(s.Description)
		field(string(s.Parameters))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
