package config

import "strings"

// kind is how a key's raw values are parsed and merged across sources.
type kind int

const (
	kindBool        kind = iota // enabled
	kindPath                    // python_path
	kindDeclaredInt             // clamped up to 1, a malformed value falls back
	kindBound                   // first positive integer of the sources, else default
	kindLimit                   // 0 = no limit, negative or malformed falls back
	kindTools                   // helper list
	kindMode                    // kernel_mode: the first source that sets it wins
	kindSandbox                 // "none" or "landlock" ("" is none)
	kindPolicy                  // allow / deny / require_approval tool lists
	kindCount                   // 0 .. a maximum, clamped; negative or malformed falls back
)

type key struct {
	name string
	kind kind
}

// keys lists every key in the order TOML renders them (the original
// tool's keys first, then the Go port's additions).
var keys = []key{
	{"enabled", kindBool},
	{"python_path", kindPath},
	{"timeout_ms", kindDeclaredInt},
	{"max_rpc_calls", kindDeclaredInt},
	{"max_rpc_result_bytes", kindDeclaredInt},
	{"max_output_bytes", kindDeclaredInt},
	{"max_text_bytes", kindBound},
	{"max_parallel_rpc", kindBound},
	{"tools", kindTools},
	{"kernel_mode", kindMode},
	{"kernel_idle_timeout_ms", kindBound},
	{"max_live_kernels", kindBound},
	{"max_queued_cells_per_kernel", kindBound},
	{"cpu_limit_seconds", kindLimit},
	{"memory_limit_mb", kindLimit},
	{"fsize_limit_mb", kindLimit},
	{"nproc_limit", kindLimit},
	{"max_spill_bytes", kindLimit},
	{"sandbox", kindSandbox},
	{"allow", kindPolicy},
	{"deny", kindPolicy},
	{"require_approval", kindPolicy},
	{"approval_timeout_ms", kindBound},
	{"warm_interpreters", kindCount},
}

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "LEMON_EXECUTE_CODE_"

// AliasPrefix starts the alias of every environment override; where a key
// is set under both prefixes, the EnvPrefix form wins.
const AliasPrefix = "EXECUTE_CODE_"

// tablePath is where the keys live in a TOML file.
var tablePath = []string{"runtime", "tools", "execute_code"}

func lookupKey(name string) (key, bool) {
	for _, k := range keys {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// EnvName is the environment variable that overrides key.
func EnvName(key string) string { return EnvPrefix + strings.ToUpper(key) }

// AliasName is EnvName's alias: the same override under AliasPrefix.
func AliasName(key string) string { return AliasPrefix + strings.ToUpper(key) }

// Keys returns every configuration key name in rendering order.
func Keys() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}
