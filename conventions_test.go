package executecode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// The README's pattern reads res.Details right after a nil check of err;
// a call whose ctx was done before it started must not hand it a nil
// error, nor a nil Details.
func TestACallWhoseCtxWasDoneBeforeItStartedReturnsCtxErr(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = mode }))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			res, err := r.rt.Execute(ctx, executecode.Call{Script: "open('ran', 'w').close()"})
			require.ErrorIs(t, err, context.Canceled)
			require.NotNil(t, res.Details)
			assert.Equal(t, executecode.KilledByCancelled, res.Details.KilledBy)
			assert.NoFileExists(t, filepath.Join(r.root, "ran"))

			dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer dcancel()
			res, err = r.rt.ExecuteParams(dctx, map[string]any{"script": "print(1)"}, nil, nil)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotNil(t, res.Details)
		})
	}
}

// A run ended by the caller's deadline says so in its error, and its
// result still carries what ran; one ended by the caller's cancel says
// context.Canceled.
func TestDeadlineAndCancelAreDistinguishable(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = mode }))
			var o *executecode.Owner
			if mode == config.Session {
				o = r.attach("s")
			}
			script := "import time\nprint('partial', flush=True)\nopen('started', 'w').close()\ntime.sleep(30)"

			dctx, dcancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer dcancel()
			res, err := r.rt.Execute(dctx, executecode.Call{Script: script, Owner: o})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, context.Canceled)
			require.NotNil(t, res.Details)
			assert.Equal(t, executecode.KilledByCancelled, res.Details.KilledBy)
			assert.Contains(t, res.Text(), "partial")

			require.NoError(t, os.Remove(filepath.Join(r.root, "started")))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { waitFile(t, filepath.Join(r.root, "started")); cancel() }()
			res, err = r.rt.Execute(ctx, executecode.Call{Script: script, Owner: o})
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			require.NotNil(t, res.Details)
			assert.Equal(t, executecode.KilledByCancelled, res.Details.KilledBy)
		})
	}
}

// Details is never nil, not even beside an error.
func TestDetailsIsNeverNil(t *testing.T) {
	off := newRig(t, withCfg(func(c *config.Config) { c.Enabled = false }))
	res, err := off.rt.Execute(context.Background(), executecode.Call{Script: "print(1)"})
	require.ErrorIs(t, err, executecode.ErrDisabled)
	assert.NotNil(t, res.Details)

	r := newRig(t)
	res, err = r.rt.Execute(context.Background(), executecode.Call{})
	require.ErrorIs(t, err, executecode.ErrMissingScript)
	assert.NotNil(t, res.Details)
	res, err = r.rt.ExecuteParams(context.Background(), map[string]any{"script": "x", "reset": "yes"}, nil, nil)
	require.ErrorIs(t, err, executecode.ErrBadReset)
	assert.NotNil(t, res.Details)

	bad := newRig(t, withCfg(func(c *config.Config) { c.PythonPath = filepath.Join(t.TempDir(), "no-python3") }))
	res, err = bad.rt.Execute(context.Background(), executecode.Call{Script: "print(1)"})
	require.ErrorIs(t, err, executecode.ErrPython)
	assert.NotNil(t, res.Details)

	closed := newRig(t)
	require.NoError(t, closed.rt.Close(context.Background()))
	res, err = closed.rt.Execute(context.Background(), executecode.Call{Script: "print(1)"})
	require.ErrorIs(t, err, executecode.ErrClosed)
	assert.NotNil(t, res.Details)
}

// A Config built by hand rather than by config.Defaults or config.Load is
// checked by New, and the error names the key that is wrong.
func TestNewValidatesAConfigItDidNotLoad(t *testing.T) {
	_, err := executecode.New(config.Config{}, executecode.WithRoot(t.TempDir()))
	require.ErrorIs(t, err, executecode.ErrConfig)
	assert.Contains(t, err.Error(), "timeout_ms")

	cases := map[string]func(*config.Config){
		"timeout_ms":                  func(c *config.Config) { c.TimeoutMS = 0 },
		"max_rpc_calls":               func(c *config.Config) { c.MaxRPCCalls = -1 },
		"max_rpc_result_bytes":        func(c *config.Config) { c.MaxRPCResultBytes = 0 },
		"max_output_bytes":            func(c *config.Config) { c.MaxOutputBytes = 0 },
		"max_text_bytes":              func(c *config.Config) { c.MaxTextBytes = 0 },
		"max_parallel_rpc":            func(c *config.Config) { c.MaxParallelRPC = 0 },
		"kernel_mode":                 func(c *config.Config) { c.KernelMode = "sessions" },
		"kernel_idle_timeout_ms":      func(c *config.Config) { c.KernelIdleTimeoutMS = 0 },
		"max_live_kernels":            func(c *config.Config) { c.MaxLiveKernels = 0 },
		"max_queued_cells_per_kernel": func(c *config.Config) { c.MaxQueuedCellsPerKernel = 0 },
		"memory_limit_mb":             func(c *config.Config) { c.MemoryLimitMB = -1 },
		"cpu_limit_seconds":           func(c *config.Config) { c.CPULimitSeconds = -1 },
		"fsize_limit_mb":              func(c *config.Config) { c.FsizeLimitMB = -1 },
		"nproc_limit":                 func(c *config.Config) { c.NprocLimit = -1 },
		"max_spill_bytes":             func(c *config.Config) { c.MaxSpillBytes = -1 },
		"approval_timeout_ms":         func(c *config.Config) { c.ApprovalTimeoutMS = 0 },
		"python_path":                 func(c *config.Config) { c.PythonPath = "python3" },
	}
	for key, spoil := range cases {
		cfg := config.Defaults()
		spoil(&cfg)
		rt, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()))
		assert.Nil(t, rt, key)
		if assert.ErrorIs(t, err, executecode.ErrConfig, key) {
			assert.Contains(t, err.Error(), key)
		}
	}
	rt, err := executecode.New(config.Defaults(), executecode.WithRoot(t.TempDir()))
	require.False(t, errors.Is(err, executecode.ErrConfig), "%v", err)
	require.NoError(t, rt.Close(context.Background()))
}

// Attach is idempotent per scope, as serve's attach is: a host that
// attaches on each turn keeps one owner and one kernel. A co-owner is
// made only with AttachCoOwner.
func TestAttachIsIdempotentPerScopeAndCoOwnershipIsExplicit(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	scope := executecode.Scope{SessionID: "s", AgentID: "main"}
	a, err := r.rt.Attach(ctx, scope)
	require.NoError(t, err)
	again, err := r.rt.Attach(ctx, scope)
	require.NoError(t, err)
	assert.Same(t, a, again)
	r.run(a, "x = 1")
	assert.Equal(t, 1, r.snapshot().Owners)

	co, err := r.rt.AttachCoOwner(ctx, scope)
	require.NoError(t, err)
	assert.NotSame(t, a, co)
	assert.Equal(t, "1\n", r.run(co, "print(x)").Text())
	assert.Equal(t, 2, r.snapshot().Owners)
	require.NoError(t, co.Detach(ctx))
	assert.Equal(t, "1\n", r.run(a, "print(x)").Text(), "a co-owner's detach keeps the state")

	require.NoError(t, a.Detach(ctx))
	fresh, err := r.rt.Attach(ctx, scope)
	require.NoError(t, err)
	assert.NotSame(t, a, fresh, "after Detach, Attach makes a new owner")
	require.NoError(t, fresh.Detach(ctx))

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = r.rt.Attach(cctx, executecode.Scope{SessionID: "t", AgentID: "main"})
	require.ErrorIs(t, err, context.Canceled)
	_, err = r.rt.Attach(ctx, executecode.Scope{SessionID: " ", AgentID: "main"})
	require.ErrorIs(t, err, executecode.ErrBadScope)

	kept, err := r.rt.Attach(ctx, scope)
	require.NoError(t, err)
	require.NoError(t, r.rt.Close(ctx))
	_, err = r.rt.Attach(ctx, scope)
	require.ErrorIs(t, err, executecode.ErrClosed, "a closed runtime hands out no owner, not even the one it kept")
	require.NoError(t, kept.Detach(ctx))
}

// An owner used after Detach is the caller's bug: it gets ErrDetached,
// in either mode, instead of a silent isolated run.
func TestAnOwnerUsedAfterDetachGetsErrDetached(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = mode }))
			o := r.attach("s")
			require.NoError(t, o.Detach(context.Background()))
			res, err := r.rt.Execute(context.Background(), executecode.Call{Script: "open('ran', 'w').close()", Owner: o})
			require.ErrorIs(t, err, executecode.ErrDetached)
			assert.NotNil(t, res.Details)
			assert.NoFileExists(t, filepath.Join(r.root, "ran"))
		})
	}
}

// Error() is for a Go caller's log (lower case, no trailing punctuation);
// ModelText keeps the tool's wording a model is shown.
func TestErrorStringsAreGoStyleAndTheModelTextIsSeparate(t *testing.T) {
	sentinels := []error{executecode.ErrDisabled, executecode.ErrMissingScript, executecode.ErrBadReset,
		executecode.ErrPython, executecode.ErrWorkspace, executecode.ErrClosed, executecode.ErrConfig,
		executecode.ErrDetached, executecode.ErrBadScope}
	for _, e := range sentinels {
		msg := e.Error()
		assert.NotRegexp(t, `^[A-Z]|[.!?:]$`, msg)
	}
	assert.Equal(t, "execute_code is disabled. Enable [runtime.tools.execute_code] in config.", executecode.ModelText(executecode.ErrDisabled))
	assert.Equal(t, "Missing required parameter: script", executecode.ModelText(executecode.ErrMissingScript))
	assert.Equal(t, "call: Missing required parameter: script", executecode.ModelText(fmt.Errorf("call: %w", executecode.ErrMissingScript)))
	assert.Equal(t, executecode.ErrBadReset.Error(), executecode.ModelText(executecode.ErrBadReset))

	off := newRig(t, withCfg(func(c *config.Config) { c.Enabled = false }))
	res, err := off.rt.Execute(context.Background(), executecode.Call{Script: "print(1)"})
	require.ErrorIs(t, err, executecode.ErrDisabled)
	assert.Equal(t, executecode.ModelText(err), res.Text())
}
