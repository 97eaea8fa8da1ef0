package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
)

// Load resolves the configuration: defaults, then the file's
// [runtime.tools.execute_code] table, then LEMON_EXECUTE_CODE_* variables
// and their EXECUTE_CODE_* aliases, then opts.Overrides. A file problem is an error wrapping ErrFile, a bad
// override one wrapping ErrOverride; anything else is forgiven with a
// warning.
func Load(opts Options) (Config, error) {
	log := opts.Logger
	if log == nil {
		nop := zerolog.Nop()
		log = &nop
	}
	w := &warner{log: log}
	environ := opts.Env
	if environ == nil {
		environ = os.Environ()
	}

	over, err := overrideSource(opts.Overrides)
	if err != nil {
		return Config{}, err
	}
	fileSrc, err := fileSource(opts.File, w)
	if err != nil {
		return Config{}, err
	}
	envSrc, err := envSource(environ, w)
	if err != nil {
		return Config{}, err
	}
	layers := []source{over, envSrc, fileSrc}

	c := Defaults()
	for _, k := range keys {
		cs := candidates(k.name, layers)
		switch k.kind {
		case kindBool:
			v, explicit, issues := resolveBool(cs)
			c.Enabled, c.EnabledExplicit = v, explicit
			w.report(k.name, issues, strconv.FormatBool(v))
		case kindPath:
			abs := func(p string) (string, error) { return absPythonPath(p, opts.Cwd, environ) }
			v, issues := resolvePath(cs, abs)
			c.PythonPath = v
			w.report(k.name, issues, strconv.Quote(v))
		case kindDeclaredInt, kindBound, kindLimit, kindCount:
			field := intField(&c, k.name)
			v, issues := intResolvers[k.kind](cs, field.get())
			field.set(v)
			w.report(k.name, issues, showInt(field.get()))
		case kindTools:
			v, issues := resolveTools(cs, opts.hostTool)
			c.Tools = v
			w.report(k.name, issues, showTools(v))
		case kindMode:
			v, issues := resolveMode(cs)
			c.KernelMode = v
			w.report(k.name, issues, string(v))
		case kindSandbox:
			v, issues := resolveSandbox(cs)
			c.Sandbox = v
			w.report(k.name, issues, strconv.Quote(v))
		case kindPolicy:
			v, issues := resolvePolicyList(k.name, cs, opts.hostTool)
			*policyField(&c, k.name) = v
			w.report(k.name, issues, showList(v))
		}
	}
	return c, nil
}

var intResolvers = map[kind]func([]candidate, int64) (int64, []issue){
	kindDeclaredInt: resolveDeclaredInt,
	kindBound:       resolveBound,
	kindLimit:       resolveLimit,
	kindCount:       resolveWarmCount,
}

// intAccess reads and writes one integer field of a Config.
type intAccess struct {
	get func() int64
	set func(int64)
}

func intField(c *Config, name string) intAccess {
	ptr := map[string]*int{
		"timeout_ms":                  &c.TimeoutMS,
		"max_rpc_calls":               &c.MaxRPCCalls,
		"max_output_bytes":            &c.MaxOutputBytes,
		"max_text_bytes":              &c.MaxTextBytes,
		"max_parallel_rpc":            &c.MaxParallelRPC,
		"kernel_idle_timeout_ms":      &c.KernelIdleTimeoutMS,
		"max_live_kernels":            &c.MaxLiveKernels,
		"max_queued_cells_per_kernel": &c.MaxQueuedCellsPerKernel,
		"cpu_limit_seconds":           &c.CPULimitSeconds,
		"memory_limit_mb":             &c.MemoryLimitMB,
		"fsize_limit_mb":              &c.FsizeLimitMB,
		"nproc_limit":                 &c.NprocLimit,
		"approval_timeout_ms":         &c.ApprovalTimeoutMS,
		"warm_interpreters":           &c.WarmInterpreters,
	}[name]
	if ptr == nil { // the int64 fields
		p64 := &c.MaxRPCResultBytes
		if name == "max_spill_bytes" {
			p64 = &c.MaxSpillBytes
		}
		return intAccess{
			get: func() int64 { return *p64 },
			set: func(v int64) { *p64 = v },
		}
	}
	return intAccess{
		get: func() int64 { return int64(*ptr) },
		set: func(v int64) { *ptr = toInt(v) },
	}
}

// policyField is the list a policy key fills.
func policyField(c *Config, name string) *[]string {
	switch name {
	case "allow":
		return &c.Allow
	case "deny":
		return &c.Deny
	}
	return &c.RequireApproval
}

// absPythonPath resolves p as the reference does: a leading ~ is the home
// directory, a relative path is taken against cwd, and the result is
// cleaned lexically (symlinks are left alone: a virtualenv's python3 must
// keep its own path).
func absPythonPath(p, cwd string, environ []string) (string, error) {
	if expanded, ok := expandHome(p, environ); ok {
		p = expanded
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		cwd = wd
	}
	if expanded, ok := expandHome(cwd, environ); ok {
		cwd = expanded
	}
	if !filepath.IsAbs(cwd) {
		abs, err := filepath.Abs(cwd)
		if err != nil {
			return "", err
		}
		cwd = abs
	}
	return filepath.Join(cwd, p), nil
}

// expandHome expands "~" and "~/..." (not "~user") using HOME from environ,
// then the process's home directory.
func expandHome(p string, environ []string) (string, bool) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, false
	}
	home := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return p, false
		}
		home = h
	}
	return filepath.Join(home, p[1:]), true
}
