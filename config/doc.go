// Package config resolves the execute_code configuration: built-in
// defaults, then the [runtime.tools.execute_code] table of an optional TOML
// file, then LEMON_EXECUTE_CODE_* environment variables (or their
// EXECUTE_CODE_* aliases, the LEMON_ form winning where both are set), then
// overrides the CLI passes from its flags, each later source winning. The merged values are
// normalised with the forgiving rules of the reference (clamp, default, typos
// resolve to per_call), and every value that is ignored, defaulted or clamped
// is logged once as a warning naming its key.
//
// It owns the key names, their defaults and parse rules, the narrowing of the
// helper allowlist, the tool policy lists (allow, deny, require_approval)
// and the approval timeout, and the rendering of a resolved configuration
// as TOML.
// A file that cannot be read or parsed, or holds a value of the wrong TOML
// type, is an error wrapping ErrFile that names the file, line and key.
//
// It may call koanf (layering), go-toml (parsing and rendering), zerolog
// (warnings) and the tools package (for the allowlist). It must never start
// processes, touch the network, write files, or read any file other than the
// one it is given: callers decide what a configuration means at run time.
package config
