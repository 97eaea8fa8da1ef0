package config

import (
	"strings"

	gotoml "github.com/pelletier/go-toml/v2"
)

// TOML renders c as a [runtime.tools.execute_code] table with every key in
// a stable order, so that Load of the result gives c back. Two keys need
// care to survive the trip: an enabled value that no source set is written
// as a comment (writing it would make it explicit, and the CLI would then
// refuse to run), and an empty helper set is written as [NoTools] because
// an empty list means the full allowlist.
func (c Config) TOML() string {
	var b strings.Builder
	b.WriteString("[runtime.tools.execute_code]\n")
	for _, k := range keys {
		var v any
		switch k.name {
		case "enabled":
			v = c.Enabled
		case "python_path":
			v = c.PythonPath
		case "max_rpc_result_bytes":
			v = c.MaxRPCResultBytes
		case "max_spill_bytes":
			v = c.MaxSpillBytes
		case "tools":
			v = c.Tools
			if len(c.Tools) == 0 {
				v = []string{NoTools}
			}
		case "kernel_mode":
			v = string(c.KernelMode)
		case "sandbox":
			v = c.Sandbox
		case "allow", "deny", "require_approval":
			v = *policyField(&c, k.name)
		default:
			v = intField(&c, k.name).get()
		}
		line := tomlLine(k.name, v)
		if k.name == "enabled" && !c.EnabledExplicit {
			line = "# " + line + " # not set"
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// tomlLine lets go-toml quote the value, so strings with quotes, control
// characters or non-ASCII text stay valid TOML.
func tomlLine(name string, v any) string {
	out, err := gotoml.Marshal(map[string]any{name: v})
	if err != nil {
		return "# " + name + ": cannot render: " + oneLine(err.Error())
	}
	return strings.TrimRight(string(out), "\n")
}
