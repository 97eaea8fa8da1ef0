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
	"github.com/executecode/executecode/mcpsource"
	"github.com/executecode/executecode/registry"
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
	// mcpServers are the WithMCP servers, started in New as mcp; their
	// tools are host tools, named in mcpTools. startCtx bounds the start.
	mcpServers []MCPServer
	mcp        *mcpsource.Source
	mcpTools   map[string]bool
	startCtx   context.Context
	tmpDir     string
	wakeups    bool

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
	sandbox     sandboxing
	// cluster is the runtime's role in a cluster (WithCluster,
	// WithKernelNode); its running side is set when the tree starts.
	cluster clustering
	// helperSource is the unconfigured shim a new kernel stages; it
	// depends only on the configuration, so it is rendered once.
	helperSource string
	// perCallModule is the module every per-call run stages (Bootstrap
	// first, as the runner carries it): the same text for all of them,
	// each configured by its run's socket.
	perCallModule string
	approver      approval.Approver

	spawner *proc.Spawner
	homes   homes
	// keys builds every session cell's kernel key, remembering how the
	// root and the interpreter resolved.
	keys registry.KeyCache

	// attachMu guards owners, the handle Attach returns per scope.
	attachMu sync.Mutex
	owners   map[Scope]*Owner

	// spillMu guards spillBook, the spills read() may reach by placeholder.
	spillMu   sync.Mutex
	spillBook spillBook

	mu     sync.Mutex
	closed bool
	roots  roots
	tree   *actors.Tree
	python string
	runs   sync.WaitGroup
	base   context.Context
	stop   context.CancelFunc
}

// New builds a runtime for cfg. It starts nothing until the first call
// but the MCP servers of WithMCP, which it starts and lists (bounded by
// WithStartContext); one that fails fails New with an error wrapping
// ErrMCP. A configuration it cannot honour is an error wrapping ErrConfig.
func New(cfg config.Config, opts ...Option) (*Runtime, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	sb, err := newSandboxing(cfg)
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, sandbox: sb, log: zerolog.Nop(), wakeups: true, approver: denyAll,
		journalSize: introspect.DefaultJournalSize, reapInterval: defaultReapInterval, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	if r.approver == nil {
		r.approver = denyAll
	}
	if err := r.checkCluster(); err != nil {
		return nil, err
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
	r.spawner = proc.NewSpawner()
	if err := r.startMCP(); err != nil {
		r.spawner.Close()
		return nil, err
	}
	if err := r.addHostTools(); err != nil {
		r.stopMCP(context.Background())
		r.spawner.Close()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	r.helperSource = shimpy.RenderModule(r.helpers, cfg.MaxTextBytes, r.specs...)
	r.perCallModule = proc.Bootstrap + shimpy.RenderPrelude(r.helperSource, r.runConfigFD())
	r.base, r.stop = context.WithCancel(context.Background())
	r.observe()
	r.warm()
	return r, nil
}

// stopMCP stops the MCP servers, if any were started.
func (r *Runtime) stopMCP(ctx context.Context) error {
	if r.mcp == nil {
		return nil
	}
	if err := r.mcp.Close(ctx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// checkConfig refuses what the runtime would otherwise ignore.
//
// A Config that config.Defaults or config.Load made always passes the
// rest; one built by hand (config.Config{}, say) is checked against the
// same bounds Load enforces, and the error names the key, because a zero
// timeout or queue would otherwise fail later with no sentinel to match.
func checkConfig(cfg config.Config) error {
	atLeast := func(key string, v int64, lo int64) error {
		if v < lo {
			return fmt.Errorf("%w: %s = %d, must be at least %d", ErrConfig, key, v, lo)
		}
		return nil
	}
	checks := []error{
		atLeast("timeout_ms", int64(cfg.TimeoutMS), 1),
		atLeast("max_rpc_calls", int64(cfg.MaxRPCCalls), 1),
		atLeast("max_rpc_result_bytes", cfg.MaxRPCResultBytes, 1),
		atLeast("max_output_bytes", int64(cfg.MaxOutputBytes), 1),
		atLeast("max_text_bytes", int64(cfg.MaxTextBytes), 1),
		atLeast("max_parallel_rpc", int64(cfg.MaxParallelRPC), 1),
		atLeast("kernel_idle_timeout_ms", int64(cfg.KernelIdleTimeoutMS), 1),
		atLeast("max_live_kernels", int64(cfg.MaxLiveKernels), 1),
		atLeast("max_queued_cells_per_kernel", int64(cfg.MaxQueuedCellsPerKernel), 1),
		atLeast("cpu_limit_seconds", int64(cfg.CPULimitSeconds), 0),
		atLeast("memory_limit_mb", int64(cfg.MemoryLimitMB), 0),
		atLeast("fsize_limit_mb", int64(cfg.FsizeLimitMB), 0),
		atLeast("nproc_limit", int64(cfg.NprocLimit), 0),
		atLeast("max_spill_bytes", cfg.MaxSpillBytes, 0),
		atLeast("approval_timeout_ms", int64(cfg.ApprovalTimeoutMS), 1),
	}
	if err := errors.Join(checks...); err != nil {
		return err
	}
	if cfg.KernelMode != config.PerCall && cfg.KernelMode != config.Session {
		return fmt.Errorf("%w: kernel_mode = %q, must be %q or %q", ErrConfig, cfg.KernelMode, config.PerCall, config.Session)
	}
	if cfg.PythonPath != "" && !filepath.IsAbs(cfg.PythonPath) {
		return fmt.Errorf("%w: python_path = %q, must be absolute or empty", ErrConfig, cfg.PythonPath)
	}
	if m := cfg.SandboxMode(); m != config.SandboxNone && m != config.SandboxLandlock {
		return fmt.Errorf("%w: sandbox = %q, must be %q or %q", ErrConfig, cfg.Sandbox, config.SandboxNone, config.SandboxLandlock)
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
	if err := ctx.Err(); err != nil {
		return notStartedResult(err)
	}
	if !r.cfg.Enabled {
		return errorResult(ErrDisabled)
	}
	call, err := CallFromParams(params)
	if err != nil {
		return errorResult(err)
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

// Execute runs one call. Everything that ran is a Result, and so is a call
// that never started; Details is never nil. The error is nil for every run
// that ended on its own (a timeout or a limit included). It wraps ctx.Err()
// when ctx ended the call, before it started or during the run: then
// errors.Is(err, context.DeadlineExceeded) tells the caller's deadline
// from its cancel (context.Canceled), and the Result still says what ran
// (killed_by "cancelled"). Any other error is a call that never started
// (see the Err* sentinels).
func (r *Runtime) Execute(ctx context.Context, call Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return notStartedResult(err)
	}
	if !r.cfg.Enabled {
		return errorResult(ErrDisabled)
	}
	if call.Script == "" {
		return errorResult(ErrMissingScript)
	}
	if call.Owner != nil && call.Owner.detached.Load() {
		return errorResult(ErrDetached)
	}
	python, err := r.interpreter()
	if err != nil {
		return errorResult(err)
	}
	if !r.enter() {
		return errorResult(ErrClosed)
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
	// Every kernel is gone: so is what was made ahead for its cells.
	err = errors.Join(err, r.closeHomes(ctx))
	// After the runs and kernels, whose calls they may still answer;
	// before the spawner, whose guard would otherwise kill them.
	err = errors.Join(err, r.stopMCP(ctx))
	r.spawner.Close()
	// Last: the stops of the kernels above are events too.
	if berr := r.bus.Close(ctx); berr != nil {
		err = errors.Join(err, fmt.Errorf("close: telemetry: %w", berr))
	}
	return errors.Join(err, rs.close())
}

// notStartedResult is a call whose ctx was done before it started: the
// model still gets the cancelled line, the caller ctx's error.
func notStartedResult(ctxErr error) (Result, error) {
	d := emptyDetails()
	d.KilledBy = KilledByCancelled
	res := Result{Content: []Content{{Type: "text", Text: cancelledLine}}, Details: d, Trust: Trusted, Blocks: []string{}}
	return res, fmt.Errorf("execute_code: not started: %w", ctxErr)
}

// errorResult is the Result beside an error of a call that never started:
// its Details are empty, never nil, and its text is the error's model text.
func errorResult(err error) (Result, error) {
	res := Result{Content: []Content{{Type: "text", Text: ModelText(err)}}, Details: emptyDetails(), Trust: Trusted, Blocks: []string{}}
	return res, err
}

func emptyDetails() *Details { return &Details{RPCTools: []string{}} }
