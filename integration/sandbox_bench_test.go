package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// sandboxPair is two runtimes over one root and interpreter, one with
// sandbox = "landlock" and one without, measured alternately so that
// the machine's load falls on both alike.
func sandboxPair(b *testing.B, mode config.Mode) (plain, boxed *executecode.Runtime) {
	b.Helper()
	root := b.TempDir()
	mk := func(sandbox string) *executecode.Runtime {
		cfg := config.Defaults()
		cfg.Enabled, cfg.KernelMode, cfg.Sandbox = true, mode, sandbox
		rt, err := executecode.New(cfg, executecode.WithRoot(root), executecode.WithTmpDir(b.TempDir()))
		require.NoError(b, err)
		b.Cleanup(func() { _ = rt.Close(context.Background()) })
		return rt
	}
	return mk(config.SandboxNone), mk(config.SandboxLandlock)
}

func medianMS(ds []time.Duration) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}

// BenchmarkSandboxedPerCallRun compares a per-call run of a one-line
// script with and without the sandbox, side by side; the first
// sandboxed run, which derives the interpreter's read set, is a warm-up.
func BenchmarkSandboxedPerCallRun(b *testing.B) {
	plain, boxed := sandboxPair(b, config.PerCall)
	call := executecode.Call{Script: "text('hi')"}
	one := func(rt *executecode.Runtime) time.Duration {
		start := time.Now()
		res, err := rt.Execute(context.Background(), call)
		require.NoError(b, err)
		require.Equal(b, []string{"hi"}, res.Blocks)
		return time.Since(start)
	}
	one(plain)
	one(boxed)
	const runs = 30
	for b.Loop() {
		var p, s []time.Duration
		for range runs {
			p = append(p, one(plain))
			s = append(s, one(boxed))
		}
		pm, sm := medianMS(p), medianMS(s)
		b.ReportMetric(pm, "unsandboxed-run-ms")
		b.ReportMetric(sm, "sandboxed-run-ms")
		b.ReportMetric(sm-pm, "sandbox-cost-ms")
		b.ReportMetric(sm/pm, "sandboxed/unsandboxed-ratio")
	}
}

// BenchmarkSandboxedNewKernel compares a new kernel's first result with
// and without the sandbox: each sample attaches a fresh session, so each
// first cell boots its own kernel.
func BenchmarkSandboxedNewKernel(b *testing.B) {
	plain, boxed := sandboxPair(b, config.Session)
	n := 0
	first := func(rt *executecode.Runtime) time.Duration {
		n++
		owner, err := rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprint("bench-", n), AgentID: "main"})
		require.NoError(b, err)
		defer func() { require.NoError(b, owner.Detach(context.Background())) }()
		start := time.Now()
		res, err := rt.Execute(context.Background(), executecode.Call{Script: "text('hi')", Owner: owner})
		require.NoError(b, err)
		require.Equal(b, []string{"hi"}, res.Blocks)
		return time.Since(start)
	}
	first(plain)
	first(boxed)
	const runs = 15
	for b.Loop() {
		var p, s []time.Duration
		for range runs {
			p = append(p, first(plain))
			s = append(s, first(boxed))
		}
		pm, sm := medianMS(p), medianMS(s)
		b.ReportMetric(pm, "unsandboxed-first-result-ms")
		b.ReportMetric(sm, "sandboxed-first-result-ms")
		b.ReportMetric(sm-pm, "sandbox-cost-ms")
		b.ReportMetric(sm/pm, "sandboxed/unsandboxed-ratio")
	}
}
