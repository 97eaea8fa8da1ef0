package pump

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/tools"
)

// Policy decides whether a claimed helper call may run, and whether it
// needs a host's approval first (tools.Policy is one). A refusal is
// answered with reason (or "tool '<name>' denied by policy" when reason is
// empty) and counted as a denial; it is decided first and never prompts.
type Policy interface {
	Allowed(tool string) (ok bool, reason string)
	RequiresApproval(tool string) bool
}

// ApprovalContext is who asks for approvals and how long a call waits for
// one (docs/protocol.md, Approvals). The ids scope the approvals a host
// stores with approve_session and approve_agent.
type ApprovalContext struct {
	SessionID, AgentID string
	// Timeout bounds each wait; 0 means no bound.
	Timeout time.Duration
	// Caller is handed to the Approver untouched with every request of
	// this bridge, so a host can route a prompt to the call it belongs to.
	Caller any
}

// Config is one bridge's pump: its directory, token, tools and budgets.
type Config struct {
	// Dir is the private (0700) rpc directory; Token the run's bridge
	// token. An empty Token fails every request closed.
	Dir   string
	Token string
	// Tools are the helpers a script may reach, by request name. A name
	// missing here (or mapped to nil) is "not available". With Gate set
	// it must be nil: Available names the helpers then.
	Tools map[string]tools.Tool

	// Gate is what every claimed call is dispatched to. Nil is the local
	// gate NewGate builds from this Config (Tools, Approvals,
	// ApprovalContext, Logger). A kernel node's pump sets one that
	// forwards each call to the session side (docs/cluster.md, Cell).
	// With Gate set, the claim's policy verdict on approval travels in
	// Call.Gated whether or not Approvals is set: the gate decides.
	Gate Gate
	// Available are the helpers Gate serves, by request name; only read
	// with Gate set. A call of any other name is refused at its claim as
	// "not available", exactly as a name missing from Tools is.
	Available []string

	// MaxCalls and MaxResultBytes are the run's budgets; zero refuses
	// every call (respectively every non-empty result).
	MaxCalls       int
	MaxResultBytes int64
	// MaxParallel is the wave size of dispatch; <= 0 means 4.
	MaxParallel int
	// MaxRequestsPerSweep bounds the requests one sweep selects; <= 0
	// means 100. Notification frames are not bounded by it.
	MaxRequestsPerSweep int

	// Policy nil allows every tool in Tools.
	Policy Policy
	// Approvals, together with Policy, gates the calls Policy requires
	// approval for: with either one nil nothing is gated.
	// A gated call runs only once the broker approves it; a denied,
	// cancelled, timed-out or failed approval is answered as such and
	// counted as a denial.
	Approvals *approval.Broker
	// ApprovalContext goes with every approval request of this bridge.
	ApprovalContext ApprovalContext
	// OnNotify receives each forwarded notify() message, raw (a caller
	// that shows it adds its own "notify: " prefix). Nil still consumes
	// and counts frames. A panic in it is swallowed.
	OnNotify func(msg string)
	// ScrubNotify, if set, rewrites each notify() message before it is
	// capped, so a cap cannot cut a host path in two and leave half of it
	// unreplaced.
	ScrubNotify func(msg string) string
	// onClaim is the claim-ledger hook: it is fed before each spend and
	// each disposition it records. A panic in it is swallowed. The server
	// records its own ledger through it; only the package's tests set it
	// beforehand, to observe, so it is no part of what a caller configures.
	onClaim func(id int64, kind claimKind, tool string)
	// OnAuthFailure is told of each request refused because it failed
	// authentication (the session's bridge.deny event). A
	// panic in it is swallowed.
	OnAuthFailure func()
	// OnFrameRefused is told of each notify() frame refused because its
	// name or MAC failed or it repeated a forwarded number: it never
	// reaches OnNotify. A panic in it is swallowed.
	OnFrameRefused func()
	// OnRoundTrip is told of each dispatched helper call once its answer
	// is published. A panic in it is swallowed.
	OnRoundTrip func(RoundTrip)

	// Bells nil turns wake-ups off: the server polls every PollInterval.
	Bells *bell.Pair
	// PollInterval is the fallback poll; 0 means 100ms with bells and
	// 25ms without. StartServer refuses a negative one.
	PollInterval time.Duration
	Logger       *zerolog.Logger

	// gate is Gate, or the local gate; available is Available as a set.
	// settled fills both in once, so a server's sweeps share them.
	gate      Gate
	available map[string]struct{}
}

const (
	defaultMaxParallel   = 4
	defaultMaxPerSweep   = 100
	defaultPollWithBells = 100 * time.Millisecond
	defaultPollNoBells   = 25 * time.Millisecond
)

// settled returns cfg with every default applied.
func (cfg Config) settled() Config {
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = defaultMaxParallel
	}
	if cfg.MaxRequestsPerSweep <= 0 {
		cfg.MaxRequestsPerSweep = defaultMaxPerSweep
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = defaultPollNoBells
		if cfg.Bells != nil {
			cfg.PollInterval = defaultPollWithBells
		}
	}
	if cfg.Logger == nil {
		nop := zerolog.Nop()
		cfg.Logger = &nop
	}
	if cfg.gate == nil {
		if cfg.Gate != nil {
			cfg.gate = cfg.Gate
			cfg.available = make(map[string]struct{}, len(cfg.Available))
			for _, name := range cfg.Available {
				cfg.available[name] = struct{}{}
			}
		} else {
			cfg.gate = &localGate{tools: cfg.Tools, approvals: cfg.Approvals, ac: cfg.ApprovalContext, log: cfg.Logger}
		}
	}
	return cfg
}

// serves says whether a call of tool may be dispatched: a name the gate
// serves. A caller holds a settled Config.
func (cfg *Config) serves(tool string) bool {
	if cfg.Gate != nil {
		_, ok := cfg.available[tool]
		return ok
	}
	t, ok := cfg.Tools[tool]
	return ok && t != nil
}

// gates says whether the calls Policy requires approval for are gated:
// with a broker, or with a Gate of the caller's, which decides.
func (cfg *Config) gates() bool { return cfg.Approvals != nil || cfg.Gate != nil }

// verdict is the claim step's decision on tool once the call is charged,
// the one rule a local claim and a guarded call both follow
// (docs/protocol.md): refused (a non-empty text) when the tool is not
// served or the policy denies it (denied), else admitted, and gated when
// the policy asks for approval and something can give it. A denial comes
// first: a denied call never prompts.
func (cfg *Config) verdict(tool string) (refusal string, denied, gated bool) {
	if !cfg.serves(tool) {
		return msgUnavailable(tool), false, false
	}
	if cfg.Policy == nil {
		return "", false, false
	}
	if allowed, reason := cfg.Policy.Allowed(tool); !allowed {
		if reason == "" {
			reason = msgDenied(tool)
		}
		return reason, true, false
	}
	return "", false, cfg.gates() && cfg.Policy.RequiresApproval(tool)
}

// errInvalidConfig is what StartServer refuses a config with; the
// *configError that wraps it names the key.
var errInvalidConfig = errors.New("invalid pump config")

// configError names the first config key StartServer refused.
type configError struct {
	Key    string // the Config field name, e.g. "Token"
	Reason string
}

func (e *configError) Error() string {
	return fmt.Sprintf("%s: %s %s", errInvalidConfig, e.Key, e.Reason)
}

func (e *configError) Unwrap() error { return errInvalidConfig }

// validate checks a session server's config in this order: the required
// keys, then the optional ones, whose zero means the
// default and whose negative is refused.
func (cfg Config) validate() error {
	checks := []struct {
		key, reason string
		bad         bool
	}{
		{"Dir", "must be a non-empty path", cfg.Dir == ""},
		{"Token", "must be a non-empty string", cfg.Token == ""},
		{"Tools", "must be a map (empty is allowed, nil is not)", cfg.Tools == nil && cfg.Gate == nil},
		{"Tools", "must be nil with a Gate (Available names its helpers)", cfg.Tools != nil && cfg.Gate != nil},
		{"Available", "is only read with a Gate", len(cfg.Available) > 0 && cfg.Gate == nil},
		{"MaxCalls", "must be positive", cfg.MaxCalls <= 0},
		{"MaxResultBytes", "must be positive", cfg.MaxResultBytes <= 0},
		{"MaxRequestsPerSweep", "must be positive (or 0 for the default)", cfg.MaxRequestsPerSweep < 0},
		{"MaxParallel", "must be positive (or 0 for the default)", cfg.MaxParallel < 0},
		{"PollInterval", "must be positive (or 0 for the default)", cfg.PollInterval < 0},
		{"ApprovalContext.Timeout", "must not be negative (0 means no bound)", cfg.ApprovalContext.Timeout < 0},
	}
	for _, c := range checks {
		if c.bad {
			return &configError{Key: c.key, Reason: c.reason}
		}
	}
	return nil
}
