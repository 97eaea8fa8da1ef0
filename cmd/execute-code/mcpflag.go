package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// mcpFlags are the repeatable --mcp and --mcp-trusted values, each
// "name=command args…", and the servers they name once validated.
type mcpFlags struct {
	values  []mcpValue
	servers []executecode.MCPServer
}

type mcpValue struct {
	flag, value string
}

const mcpUsage = "add an MCP server as a tool source (repeatable): 'name=command args…' as one argument, split into words as a shell would, nothing expanded; its tools become helpers name_<tool>"

func (m *mcpFlags) register(add func(name, usage string, fn func(string) error)) {
	for _, f := range []string{"mcp", "mcp-trusted"} {
		usage := mcpUsage
		if f == "mcp-trusted" {
			usage = "as --mcp, for a server whose results are trusted"
		}
		add(f, usage, func(v string) error {
			m.values = append(m.values, mcpValue{flag: f, value: v})
			return nil
		})
	}
}

// parse validates every value; the error names the flag.
func (m *mcpFlags) parse() error {
	m.servers = nil
	for _, v := range m.values {
		s, err := parseMCP(v.value)
		if err != nil {
			return fmt.Errorf("--%s: %w", v.flag, err)
		}
		if slices.ContainsFunc(m.servers, func(o executecode.MCPServer) bool { return o.Name == s.Name }) {
			return fmt.Errorf("--%s: the server name %q is given twice", v.flag, s.Name)
		}
		s.Trusted = v.flag == "mcp-trusted"
		m.servers = append(m.servers, s)
	}
	return nil
}

// parseMCP reads "name=command args…": the name a python identifier, the
// rest split into words as a shell splits them (quotes, backslashes,
// braces), with nothing expanded: the shell the flag was typed in has
// expanded what it meant to, so a "$" left here is an error, not an
// empty string.
func parseMCP(v string) (executecode.MCPServer, error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok {
		return executecode.MCPServer{}, fmt.Errorf("%q is not name=command [args…]", v)
	}
	if !tools.UsableParam(name) {
		return executecode.MCPServer{}, fmt.Errorf("the server name %q must be an ASCII python identifier (not a keyword, no leading underscore)", name)
	}
	words, err := shellWords(rest)
	if err != nil {
		return executecode.MCPServer{}, fmt.Errorf("server %q: %w", name, err)
	}
	if len(words) == 0 || words[0] == "" {
		return executecode.MCPServer{}, fmt.Errorf("server %q has no command", name)
	}
	return executecode.MCPServer{Name: name, Command: words[0], Args: words[1:]}, nil
}

// errExpansion refuses what the command line would need a shell to run.
var errExpansion = errors.New("expansions ($, `…`, $(…), globs of ?(…)) are not run here; quote them for your own shell")

func shellWords(s string) ([]string, error) {
	var out []string
	cfg := &expand.Config{Env: expand.ListEnviron()}
	for w, err := range syntax.NewParser().WordsSeq(strings.NewReader(s)) {
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		var bad bool
		syntax.Walk(w, func(n syntax.Node) bool {
			switch n.(type) {
			case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
				bad = true
			}
			return !bad
		})
		if bad {
			return nil, fmt.Errorf("%q: %w", s, errExpansion)
		}
		fields, err := expand.Fields(cfg, w)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, fields...)
	}
	return out, nil
}

// options are the runtime options the servers need.
func (m *mcpFlags) options() []executecode.Option {
	var out []executecode.Option
	for _, s := range m.servers {
		out = append(out, executecode.WithMCP(s))
	}
	return out
}

// prefixes are the helper-name prefixes of the servers, which --tools and
// the configuration may name before the servers have listed their tools.
func (m *mcpFlags) prefixes() []string {
	var out []string
	for _, s := range m.servers {
		out = append(out, s.Name+"_")
	}
	return out
}

// checkTools is the rest of --tools' check, once the runtime has listed
// the servers' tools: a name with a server's prefix must be one of them.
func (m *mcpFlags) checkTools(list string, helpers []string) error {
	if list == "" {
		return nil
	}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		for _, s := range m.servers {
			if strings.HasPrefix(n, s.Name+"_") && !slices.Contains(helpers, n) {
				return fmt.Errorf("--tools: %q is not a tool of the MCP server %q", n, s.Name)
			}
		}
	}
	return nil
}

// mcpPrefixed reports whether n has the prefix of an --mcp server.
func (c *common) mcpPrefixed(n string) bool {
	return slices.ContainsFunc(c.mcp.prefixes(), func(p string) bool { return strings.HasPrefix(n, p) && len(n) > len(p) })
}

// builtinTools is --tools as the configuration's tools entry: without the
// MCP servers' names, which it cannot enable or disable and which
// checkTools checks once they are listed; a list of only those enables
// no built-in.
func (c *common) builtinTools() []string {
	var out []string
	for _, n := range strings.Split(c.tools, ",") {
		if !c.mcpPrefixed(strings.TrimSpace(n)) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return []string{config.NoTools}
	}
	return out
}
