package executecode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/executecode/executecode/actors"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/shimpy"
	"github.com/executecode/executecode/telemetry"
	"github.com/executecode/executecode/tools"
)

// minTimeout is the floor of a call's timeout_ms: a call's timeout is
// clamped to [minTimeout, the configured timeout_ms].
const minTimeout = time.Second

// Call is one execute_code invocation.
type Call struct {
	Script string
	// TimeoutMS is the call's timeout_ms parameter; 0 means the configured
	// timeout. It is clamped to [1000, configured timeout_ms].
	TimeoutMS int
	// Reset asks to discard retained state first (redundant per call).
	Reset bool
	// Notify receives each notify(msg) of the script as it arrives. Nil
	// discards them.
	Notify func(msg string)
	// Owner is the attached session the call belongs to. In session mode a
	// call without one has no session scope and runs isolated.
	Owner *Owner
	// ApprovalTag is handed to the Approver with every approval request of
	// this call (approval.Request.Caller), so a host can route the prompt.
	ApprovalTag any
	// Queued, when set, is called once, before Execute returns, as soon as
	// the call has its place: in session mode when its cell is in its
	// kernel's FIFO (or was answered without one), per call when its run
	// begins. A host sending one session's calls from several goroutines
	// waits for it before sending the next, and the kernel runs them in
	// that order.
	Queued func()
}

// Option configures a Runtime.
type Option func(*Runtime)

// WithLogger sets the logger for warnings (default: no logging).
func WithLogger(l zerolog.Logger) Option { return func(r *Runtime) { r.log = l } }

// WithRoot sets the tool root, which is also the script's working
// directory (default: the process's working directory).
func WithRoot(dir string) Option { return func(r *Runtime) { r.rootDir = dir } }

// WithTools replaces the built-in helpers with the host's own. Only names
// in the allowlist that the configuration enables are reachable; New
// refuses any other name, since a tool under a new name needs the spec
// WithHostTool takes.
func WithTools(ts map[string]tools.Tool) Option { return func(r *Runtime) { r.tools = ts } }

// WithPrivateNetworks lets the built-in webfetch reach loopback and
// private addresses. Off by default, so an embedding host is not open to
// request forgery by accident; the CLI, bash-equivalent anyway, turns it on.
func WithPrivateNetworks() Option { return func(r *Runtime) { r.privateNets = true } }

// WithTelemetry re-emits every event of the runtime on bus, whose
// subscribers (a telemetry.LogHandler, say) get them as that bus
// delivers: an Immediate handler at once, any other through its own
// bounded queue. The runtime never closes bus.
func WithTelemetry(bus *telemetry.Bus) Option { return func(r *Runtime) { r.userBus = bus } }

// WithLifecycleEntries sets how many python_repl_lifecycle_observed
// entries Lifecycle keeps (default introspect.DefaultJournalSize); 0
// keeps none.
func WithLifecycleEntries(n int) Option { return func(r *Runtime) { r.journalSize = max(n, 0) } }

// WithTmpDir sets where the private staging root is made. By default
// workspaces go to /dev/shm when TMPDIR is unset and it is a writable tmpfs
// (bridge round trips are file operations), and spill files to TMPDIR.
func WithTmpDir(dir string) Option { return func(r *Runtime) { r.tmpDir = dir } }

// WithWakeups turns the bridge doorbells on (default) or off. Off, both
// sides poll as the reference does (host 25 ms, shim 20 ms); it exists to
// measure what the doorbells buy.
func WithWakeups(on bool) Option { return func(r *Runtime) { r.wakeups = on } }

// Runtime runs execute_code calls. It is safe for concurrent use.
type Runtime struct {
	cfg     config.Config
	log     zerolog.Logger
	rootDir string
	tools   map[string]tools.Tool
	// host are the WithHostTool registrations; specs their validated
	// specs, helpers the reachable helper names (built-ins, then host
	// tools) and toolsDigest their digest, which every kernel key carries.
	host        []hostTool
	specs       []tools.Spec
	helpers     []string
	toolsDigest string
	tmpDir      string
	wakeups     bool

	// bus is the runtime's own event bus: every emitter of the runtime
	// emits here, and the journal, the metrics and the host's bus
	// (userBus) subscribe. It is closed by Close.
	bus         *telemetry.Bus
	userBus     *telemetry.Bus
	journal     *introspect.Journal
	journalSize int
	metrics     *introspect.Metrics
	// reapInterval is how often the registry looks for idle kernels.
	reapInterval time.Duration
	// now is the spill reaper's clock.
	now func() time.Time

	privateNets bool
	// helperSource is the unconfigured shim a new kernel stages; it
	// depends only on the configuration, so it is rendered once.
	helperSource string
	approver     approval.Approver

	spawner *proc.Spawner

	mu     sync.Mutex
	closed bool
	roots  roots
	tree   *actors.Tree
	python string
	runs   sync.WaitGroup
	base   context.Context
	stop   context.CancelFunc
}

// New builds a runtime for cfg. It starts nothing until the first call.
// A configuration it cannot honour is an error wrapping ErrConfig.
func New(cfg config.Config, opts ...Option) (*Runtime, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, log: zerolog.Nop(), wakeups: true, approver: denyAll,
		journalSize: introspect.DefaultJournalSize, reapInterval: defaultReapInterval, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	if r.approver == nil {
		r.approver = denyAll
	}
	if r.rootDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("tool root: %w", err)
		}
		r.rootDir = wd
	}
	abs, err := filepath.Abs(r.rootDir)
	if err != nil {
		return nil, fmt.Errorf("tool root %q: %w", r.rootDir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("tool root %q is not a directory", r.rootDir)
	}
	r.rootDir = abs
	if r.tools == nil {
		builtin, err := tools.Builtin(tools.Options{Root: abs, AllowPrivateNetworks: r.privateNets})
		if err != nil {
			return nil, fmt.Errorf("built-in tools: %w", err)
		}
		r.tools = builtin
	}
	if err := r.addHostTools(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	r.helperSource = shimpy.RenderModule(r.helpers, cfg.MaxTextBytes, r.specs...)
	r.base, r.stop = context.WithCancel(context.Background())
	r.spawner = proc.NewSpawner()
	r.observe()
	return r, nil
}

// checkConfig refuses what the runtime would otherwise ignore. A sandbox
// that is asked for but not applied would run scripts unconfined while the
// operator believes they are confined, so it fails closed.
func checkConfig(cfg config.Config) error {
	if cfg.Sandbox != config.SandboxNone {
		return fmt.Errorf("%w: sandbox = %q is not available in this build; scripts would run unconfined, so set sandbox = \"\" (LEMON_EXECUTE_CODE_SANDBOX)", ErrConfig, cfg.Sandbox)
	}
	return nil
}

// Config is the configuration the runtime was built with.
func (r *Runtime) Config() config.Config { return r.cfg }

// Description is the tool description a model would be shown: it lists
// exactly the helpers a script can reach, host tools included.
func (r *Runtime) Description() string { return describe(r.cfg, r.helpers, r.specs) }

// ExecuteParams runs a call given as the tool's JSON parameters, checking
// them in the reference's order: disabled, script, reset, interpreter.
//
// owner is the attached session the call belongs to (nil: none).
func (r *Runtime) ExecuteParams(ctx context.Context, params map[string]any, notify func(string), owner *Owner) (Result, error) {
	return r.ExecuteParamsTagged(ctx, params, notify, owner, nil)
}

// ExecuteParamsTagged is ExecuteParams with the call's ApprovalTag.
func (r *Runtime) ExecuteParamsTagged(ctx context.Context, params map[string]any, notify func(string), owner *Owner, tag any) (Result, error) {
	if ctx.Err() != nil {
		return cancelledResult(), nil
	}
	if !r.cfg.Enabled {
		return Result{}, ErrDisabled
	}
	call, err := CallFromParams(params)
	if err != nil {
		return Result{}, err
	}
	call.Notify, call.Owner, call.ApprovalTag = notify, owner, tag
	return r.Execute(ctx, call)
}

// CallFromParams reads the tool's parameters (script, timeout_ms, reset)
// into a Call, for a host that sets the rest of it itself. A missing
// script is ErrMissingScript and a reset that is not a boolean
// ErrBadReset; a timeout_ms that is not an integer is ignored, as the
// reference does.
func CallFromParams(params map[string]any) (Call, error) {
	script, _ := params["script"].(string)
	if script == "" {
		return Call{}, ErrMissingScript
	}
	reset := false
	switch v := params["reset"].(type) {
	case nil:
	case bool:
		reset = v
	default:
		return Call{}, ErrBadReset
	}
	return Call{Script: script, TimeoutMS: timeoutParam(params["timeout_ms"]), Reset: reset}, nil
}

// timeoutParam keeps an integer timeout_ms and ignores anything else, as
// the reference does (never an error).
func timeoutParam(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < math.MaxInt32 {
			return int(n)
		}
	}
	return 0
}

// Execute runs one call. Errors are returned only for calls that never
// started (see the Err* sentinels); everything that ran is a Result.
func (r *Runtime) Execute(ctx context.Context, call Call) (Result, error) {
	if ctx.Err() != nil {
		return cancelledResult(), nil
	}
	if !r.cfg.Enabled {
		return Result{}, ErrDisabled
	}
	if call.Script == "" {
		return Result{}, ErrMissingScript
	}
	python, err := r.interpreter()
	if err != nil {
		return Result{}, err
	}
	if !r.enter() {
		return Result{}, ErrClosed
	}
	defer r.runs.Done()
	if call.Queued != nil {
		queued := sync.OnceFunc(call.Queued)
		call.Queued = queued
		defer queued()
	} else {
		call.Queued = func() {}
	}
	return r.execute(ctx, call, python)
}

func (r *Runtime) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.runs.Add(1)
	return true
}

// interpreter resolves python3 once per runtime (kernelworker.ResolvePython).
func (r *Runtime) interpreter() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.python != "" {
		return r.python, nil
	}
	p, err := proc.ResolvePython(r.cfg.PythonPath)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrPython, err)
	}
	r.python = p
	return p, nil
}

// Close cancels every run still going, waits for their teardown (bounded
// by ctx), and releases the staging root and the spawner.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.stop()
	done := make(chan struct{})
	go func() { r.runs.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("close: runs still tearing down: %w", ctx.Err())
	}
	r.mu.Lock()
	rs, tree := r.roots, r.tree
	r.mu.Unlock()
	if tree != nil {
		// Each kernel is stopped as a shutdown first, so that it has its
		// session.stop; the tree's own stop then ends what is left.
		if serr := tree.Registry.StopAll(ctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("close: stop kernels: %w", serr))
		}
		err = errors.Join(err, tree.Shutdown(ctx))
	}
	r.spawner.Close()
	// Last: the stops of the kernels above are events too.
	if berr := r.bus.Close(ctx); berr != nil {
		err = errors.Join(err, fmt.Errorf("close: telemetry: %w", berr))
	}
	return errors.Join(err, rs.close())
}

func cancelledResult() Result {
	return Result{Content: []Content{{Type: "text", Text: cancelledLine}}, Trust: Trusted, Blocks: []string{}}
}
