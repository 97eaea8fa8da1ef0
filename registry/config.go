package registry

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/kernelworker"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/telemetry"
)

// Defaults.
const (
	defaultMaxLiveKernels = 16
	defaultIdleTimeout    = 30 * time.Minute
	defaultReapInterval   = 60 * time.Second
	defaultStopTimeout    = 15 * time.Second
	defaultStatusTimeout  = 5 * time.Second
)

// Starter starts the worker of a new kernel for key with the given
// generation and returns once the kernel has booted, not once it is
// ready. It runs on a goroutine of its own, never inside the registry,
// which keeps answering meanwhile; ctx ends when the registry stops, and
// a Starter should then give up. Its error should explain the failure;
// the registry wraps it in ErrStartupFailed.
type Starter func(ctx context.Context, key Key, generation uint64, opts WorkerOptions) (kernelworker.Handle, error)

// WorkerOptions are the bounds a kernel takes at its start and keeps for
// its life: later acquires of the same kernel do not
// change them.
type WorkerOptions struct {
	// InterpreterConfigured is the interpreter path as configured, which
	// the kernel executes; the key holds the canonical one.
	InterpreterConfigured string
	HelperSource          string
	MaxQueuedCells        int
	MaxOutputBytes        int
	Limits                proc.Limits
}

// Config configures the registry. Zero values take the defaults.
type Config struct {
	// MaxLiveKernels is the cap used when a request carries none.
	MaxLiveKernels int
	// IdleTimeout is the idle timeout used when a request carries none.
	// Negative means kernels are never reaped for idleness.
	IdleTimeout time.Duration
	// ReapInterval is the period of the reaper's timer.
	ReapInterval time.Duration
	Starter      Starter
	// Now is the clock of idleness and kernel lifetimes.
	Now       func() time.Time
	Telemetry *telemetry.Bus
	Logger    *zerolog.Logger
	// StopTimeout bounds a worker's graceful stop before the registry
	// stops its actor by force and counts a stop_failed.
	StopTimeout time.Duration
	// StatusTimeout bounds one status query to a worker; a worker that
	// does not answer in time is unreachable.
	StatusTimeout time.Duration
	// ExitOf, if set, tells why a worker ended (its kernelworker OnExit
	// report) and forgets it; known is false when the worker never said.
	// It is asked once per Terminated of a worker, so that a kernel that
	// died on its own is reported with its crash reason,
	// and one that stopped itself as asked as a session.stop.
	ExitOf func(worker *actor.PID) (exit kernelworker.Exit, known bool)
}

func (c Config) withDefaults() Config {
	if c.MaxLiveKernels <= 0 {
		c.MaxLiveKernels = defaultMaxLiveKernels
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = defaultReapInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = defaultStopTimeout
	}
	if c.StatusTimeout <= 0 {
		c.StatusTimeout = defaultStatusTimeout
	}
	return c
}

// Props is the registry actor. Each incarnation starts empty, with
// generations from 1: a restarted registry knows no
// kernel, which is why it shares its supervisor with the workers.
func Props(cfg Config) *actor.Props {
	cfg = cfg.withDefaults()
	return actor.PropsFromProducer(func() actor.Actor { return newRegistry(cfg) })
}
