package pump

import (
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/executecode/executecode/tools"
)

// Policy decides whether a claimed helper call may run. A refusal is
// answered with reason (or "tool '<name>' denied by policy" when reason is
// empty) and counted as a denial.
type Policy interface {
	Allowed(tool string) (ok bool, reason string)
}

// Config is one bridge's pump: its directory, token, tools and budgets.
type Config struct {
	// Dir is the private (0700) rpc directory; Token the run's bridge
	// token. An empty Token fails every request closed.
	Dir   string
	Token string
	// Tools are the helpers a script may reach, by request name. A name
	// missing here (or mapped to nil) is "not available".
	Tools map[string]tools.Tool

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
	// OnNotify receives each forwarded notify() message, raw (a caller
	// that shows it adds its own "notify: " prefix). Nil still consumes
	// and counts frames. A panic in it is swallowed.
	OnNotify func(msg string)
	// OnClaim is the claim-ledger hook (bridge.md §6.2): it is fed before
	// each spend and each disposition it records. A panic in it is
	// swallowed.
	OnClaim func(id int64, kind ClaimKind, tool string)

	// Bells nil turns wake-ups off: Serve polls every PollInterval.
	Bells *Bells
	// PollInterval is the fallback poll; 0 means 100ms with bells and
	// 25ms without.
	PollInterval time.Duration
	Logger       *zerolog.Logger

	// unlink is the plain unlink every hygiene deletion goes through;
	// tests replace it to make a deletion fail.
	unlink func(path string) error
	// onSweep, when set, is told how much work each Serve sweep found.
	onSweep func(work int)
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
	if cfg.unlink == nil {
		// syscall.Unlink, not os.Remove: os.Remove falls back to rmdir,
		// and a directory planted under a protocol name must stay for
		// teardown.
		cfg.unlink = syscall.Unlink
	}
	return cfg
}
