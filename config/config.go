package config

import (
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/executecode/executecode/tools"
	"github.com/rs/zerolog"
)

// Mode selects how scripts run: a fresh interpreter per call, or cells on a
// persistent kernel.
type Mode string

const (
	PerCall Mode = "per_call"
	Session Mode = "session"
)

// Config is a resolved, normalised execute_code configuration. Every field
// holds a usable value; callers never re-validate.
type Config struct {
	Enabled bool
	// EnabledExplicit is true only when some source gave an enabled value
	// that parses as true or false. The CLI counts its own invocation as
	// consent unless enabled = false was explicit.
	EnabledExplicit bool
	// PythonPath is "" (find python3 on PATH) or an absolute, cleaned path.
	PythonPath        string
	TimeoutMS         int
	MaxRPCCalls       int
	MaxRPCResultBytes int64
	MaxOutputBytes    int
	MaxTextBytes      int
	MaxParallelRPC    int
	// Tools is the helper set in configured order, duplicates kept, every
	// name a member of tools.Allowlist or of the Options.HostTools it was
	// loaded with. Empty means no helpers at all.
	Tools                   []string
	KernelMode              Mode
	KernelIdleTimeoutMS     int
	MaxLiveKernels          int
	MaxQueuedCellsPerKernel int
	// Resource limits for every python3 child; 0 means no limit.
	CPULimitSeconds int
	MemoryLimitMB   int
	FsizeLimitMB    int
	NprocLimit      int
	// MaxSpillBytes caps a run's full-output spill file; 0 means no cap of
	// its own (see SpillLimitBytes).
	MaxSpillBytes int64
	// Sandbox is "none" or "landlock" (see SandboxMode); "" in a Config
	// built by hand means none.
	Sandbox string
	// Allow, Deny and RequireApproval are the tool policy applied to every
	// helper call (see Policy). Each holds Allowlist members (and the
	// Options.HostTools it was loaded with) in configured order without
	// duplicates; empty means "no such list". Allow is
	// [NoTools] when it named only unknown tools: such a list allows
	// nothing, rather than (being empty) everything.
	Allow           []string
	Deny            []string
	RequireApproval []string
	// ApprovalTimeoutMS bounds how long a helper call waits for approval.
	ApprovalTimeoutMS int
	// WarmInterpreters is how many interpreters of the runtime's default
	// kind (its mode's) are kept started ahead, 0 to MaxWarmInterpreters;
	// 0 starts every one when it is needed.
	WarmInterpreters int
}

// MaxWarmInterpreters bounds warm_interpreters: each is an idle python3
// of tens of megabytes, and one more than the calls that start together
// buys nothing.
const MaxWarmInterpreters = 8

// Sandbox values.
const (
	SandboxNone     = "none"
	SandboxLandlock = "landlock"
)

// SandboxMode is c.Sandbox with "" read as none: a Config literal that
// never set the field asks for no sandbox.
func (c Config) SandboxMode() string {
	if c.Sandbox == "" {
		return SandboxNone
	}
	return c.Sandbox
}

// NoTools is the tools entry that stands for "no helpers": it is not a tool
// name, so a list holding only it narrows the allowlist to nothing, and it is
// the one unknown name that is not warned about. TOML renders an empty
// helper set with it, because an empty list means the full allowlist.
const NoTools = "none"

var (
	// ErrFile wraps every configuration file error: unreadable, not valid
	// TOML, or a value of the wrong TOML type. Its *FileError names the file,
	// line and key.
	ErrFile = errors.New("invalid config file")
	// ErrOverride wraps an override (a CLI flag) that names no key or holds
	// a value its key cannot take; flags are checked strictly because a typo
	// there is a usage error, not a forgiving config value.
	ErrOverride = errors.New("invalid config override")
)

// Defaults returns the configuration used when no source sets anything.
func Defaults() Config {
	return Config{
		PythonPath:              "",
		TimeoutMS:               120000,
		MaxRPCCalls:             100,
		MaxRPCResultBytes:       5242880,
		MaxOutputBytes:          50000,
		MaxTextBytes:            65536,
		MaxParallelRPC:          4,
		Tools:                   slices.Clone(tools.Allowlist),
		KernelMode:              PerCall,
		KernelIdleTimeoutMS:     1800000,
		MaxLiveKernels:          16,
		MaxQueuedCellsPerKernel: 8,
		CPULimitSeconds:         0,
		MemoryLimitMB:           4096,
		FsizeLimitMB:            1024,
		NprocLimit:              0,
		MaxSpillBytes:           DefaultMaxSpillBytes,
		Sandbox:                 SandboxNone,
		Allow:                   []string{},
		Deny:                    []string{},
		RequireApproval:         []string{},
		ApprovalTimeoutMS:       300000,
		WarmInterpreters:        1,
	}
}

// DefaultMaxSpillBytes is max_spill_bytes when no source sets it: the
// default file size limit, so a spill is never larger than a file the
// script could have written itself.
const DefaultMaxSpillBytes = 1 << 30

// Options says where Load finds its sources.
type Options struct {
	// File is the TOML file to read; "" means none.
	File string
	// Env is the environment as os.Environ gives it; nil means os.Environ().
	Env []string
	// Cwd resolves a relative python_path; "" means the process's cwd.
	Cwd string
	// Overrides maps TOML key names to values that beat every other source
	// (CLI flags). Integers may be any Go integer type or a numeric string;
	// tools may be a []string or a comma/colon separated string.
	Overrides map[string]any
	// Logger receives one warning per value ignored, defaulted or clamped;
	// nil discards them.
	Logger *zerolog.Logger
	// HostTools are the names of the tools the host registers with
	// executecode.WithHostTool: the tools entry and the policy lists
	// (allow, deny, require_approval) may name them besides the built-ins,
	// without a warning. Naming a tool never registers it.
	HostTools []string
	// HostToolPrefixes are name prefixes of host tools known only once the
	// host has started (an MCP server's "<name>_"): names with one are
	// kept like HostTools, and the runtime warns of those it lacks.
	HostToolPrefixes []string
}

// hostTool reports whether name is one of the host's tools, by name or
// by prefix.
func (o Options) hostTool(name string) bool {
	if slices.Contains(o.HostTools, name) {
		return true
	}
	for _, p := range o.HostToolPrefixes {
		if p != "" && strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// Timeout is TimeoutMS as a duration, saturating instead of overflowing.
func (c Config) Timeout() time.Duration { return millis(int64(c.TimeoutMS)) }

// KernelIdleTimeout is KernelIdleTimeoutMS as a duration, saturating.
func (c Config) KernelIdleTimeout() time.Duration { return millis(int64(c.KernelIdleTimeoutMS)) }

// ApprovalTimeout is ApprovalTimeoutMS as a duration, saturating.
func (c Config) ApprovalTimeout() time.Duration { return millis(int64(c.ApprovalTimeoutMS)) }

// Policy is the configured tool policy. The lists are copies: changing
// them does not change c.
func (c Config) Policy() tools.Policy {
	return tools.Policy{
		Allow:           slices.Clone(c.Allow),
		Deny:            slices.Clone(c.Deny),
		RequireApproval: slices.Clone(c.RequireApproval),
	}
}

// CPULimit is the CPU budget per run or cell; 0 means no limit.
func (c Config) CPULimit() time.Duration {
	s := int64(c.CPULimitSeconds)
	if s <= 0 {
		return 0
	}
	if s > math.MaxInt64/int64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s) * time.Second
}

// MemoryLimitBytes is the RLIMIT_AS value in bytes; 0 means no limit.
func (c Config) MemoryLimitBytes() uint64 { return mebibytes(c.MemoryLimitMB) }

// FsizeLimitBytes is the RLIMIT_FSIZE value in bytes; 0 means no limit.
func (c Config) FsizeLimitBytes() uint64 { return mebibytes(c.FsizeLimitMB) }

// SpillLimitBytes is the cap of a run's spill file: the smaller of
// max_spill_bytes and fsize_limit_mb, each where set, since the host
// writes the spill on the script's behalf and should write no larger a
// file than the script itself may. 0 means no cap.
func (c Config) SpillLimitBytes() int64 {
	limit := max(c.MaxSpillBytes, 0)
	if f := int64(c.FsizeLimitBytes()); f > 0 && (limit == 0 || f < limit) {
		limit = f
	}
	return limit
}

func millis(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}

// mebibytes saturates at MaxInt64 bytes, so a huge limit stays "huge"
// rather than wrapping into a small or infinite rlimit.
func mebibytes(mb int) uint64 {
	if mb <= 0 {
		return 0
	}
	if uint64(mb) > math.MaxInt64>>20 {
		return math.MaxInt64
	}
	return uint64(mb) << 20
}
