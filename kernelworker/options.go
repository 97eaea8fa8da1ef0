package kernelworker

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/telemetry"
)

// ErrStartupFailed wraps every reason Start could not boot a kernel. When
// Start returns it, nothing of the kernel is left: no process, no
// workspace, no pipe.
var ErrStartupFailed = errors.New("kernel startup failed")

// Defaults of Options.
const (
	defaultMaxQueuedCells = 8
	defaultMaxOutputBytes = 50000
	defaultStartupTimeout = 10 * time.Second
	defaultInterruptGrace = time.Second
	defaultTermGrace      = time.Second
	defaultKillGrace      = time.Second
	defaultByeTimeout     = time.Second
	// EndingBound is the longest a worker with the default graces takes
	// from discarding its kernel (a timeout, a cancel) to the kernel's
	// end, when the held answer goes: the interrupt grace, the bye wait,
	// SIGTERM's and SIGKILL's graces and the session sweep.
	EndingBound = defaultInterruptGrace + defaultByeTimeout + defaultTermGrace + defaultKillGrace + proc.SessionSweepBound
)

// Options configure one worker and its kernel.
type Options struct {
	// Key is the registry's opaque identity of the kernel, echoed in
	// Status; Generation likewise.
	Key        any
	Generation uint64
	// Cwd is the canonical key cwd: the runner's base directory, and every
	// cell's unless the cell names its own.
	Cwd string
	// Interpreter is the python3 path as configured; it is what runs, so a
	// virtualenv's python3 keeps its environment.
	Interpreter string
	// HelperSource is the unconfigured exec_tools module, staged next to
	// the runner; "" stages none.
	HelperSource string
	// Runner is the runner program; "" means shimpy.Runner().
	Runner string
	// MaxQueuedCells bounds the cells waiting behind the active one
	// (0 means 8).
	MaxQueuedCells int
	// MaxOutputBytes bounds each cell's kept output (0 means 50000).
	MaxOutputBytes int
	// MaxSpillBytes caps each cell's spill file; 0 means no cap.
	MaxSpillBytes int64
	// Limits are the kernel's rlimits. CPUSeconds bounds the boot and is
	// the default per-cell CPU budget; the CPU hard limit is always left
	// unlimited so the budget can be raised before each cell.
	Limits  proc.Limits
	Spawner *proc.Spawner
	// Workspace reserves the kernel's private workspace directory.
	Workspace func() (dir string, err error)
	// ReleaseWorkspace, if set, removes the workspace once the kernel is
	// gone, instead of a bounded removal of the directory: the host's
	// cell bridges may live beside it and outlast the kernel.
	ReleaseWorkspace func(dir string)
	// Confine, if set, gives the sandbox the interpreter must confine
	// itself with, for the kernel's workspace; nil means none. An error
	// fails the start: a kernel to be confined never runs unconfined.
	Confine func(ctx context.Context, interpreter, workspace string) (*proc.Sandbox, error)
	// Spill opens a private spill file for a cell's truncated output;
	// ReleaseSpill, if set, is told when a cell's capture is finished
	// with it.
	Spill        func() (*os.File, error)
	ReleaseSpill func(path string)
	Telemetry    *telemetry.Bus
	Logger       *zerolog.Logger
	// OnExit, if set, is called once by the actor right before it stops,
	// with why the kernel ended. It must not block: send a message.
	OnExit func(Exit)

	StartupTimeout, InterruptGrace, TermGrace, KillGrace, ByeTimeout time.Duration
}

// Exit says why a kernel ended, for the registry's session telemetry
// (which alone knows the live counts).
type Exit struct {
	// Crash is "" when the kernel ended as asked (Stop, or the bye after
	// a cancellation), else why it died on its own.
	Crash telemetry.SessionCrashReason
	// Lifetime runs from boot to the end of the teardown.
	Lifetime time.Duration
}

// Handle is a started worker: its actor, the kernel's doorbells, which
// every cell's RPC server subscribes to, and its private workspace, where
// the runner and the helper module live (a path each cell's Scrub must
// replace, since sys.argv[0] and __file__ name it).
type Handle struct {
	PID       *actor.PID
	Bells     *bell.Pair
	Workspace string
	// Status is the worker's status without a message (StatusView).
	Status *StatusView
	// Remote says PID stands for a kernel on another node
	// (docs/cluster.md): it has no bells and no workspace here, and its
	// cells carry their helper calls with them instead of a local bridge.
	Remote bool
}

func (o Options) withDefaults() Options {
	if o.MaxQueuedCells <= 0 {
		o.MaxQueuedCells = defaultMaxQueuedCells
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = defaultMaxOutputBytes
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.StartupTimeout, defaultStartupTimeout)
	def(&o.InterruptGrace, defaultInterruptGrace)
	def(&o.TermGrace, defaultTermGrace)
	def(&o.KillGrace, defaultKillGrace)
	def(&o.ByeTimeout, defaultByeTimeout)
	o.Limits.CPUHardUnlimited = true
	return o
}

func (o Options) validate() error {
	switch {
	case o.Cwd == "":
		return errors.New("options: empty cwd")
	case o.Interpreter == "":
		return errors.New("options: empty interpreter")
	case o.Spawner == nil:
		return errors.New("options: no spawner")
	case o.Workspace == nil:
		return errors.New("options: no workspace reservation")
	}
	return nil
}
