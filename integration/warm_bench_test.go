package integration

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// warmRuntime is a runtime of mode whose warm_interpreters is n, set the
// way an operator sets it (the environment variable).
func warmRuntime(b *testing.B, mode config.Mode, n int) *executecode.Runtime {
	cfg, err := config.Load(config.Options{Env: []string{
		config.EnvName("enabled") + "=true",
		config.EnvName("kernel_mode") + "=" + string(mode),
		config.EnvName("warm_interpreters") + "=" + strconv.Itoa(n),
	}})
	require.NoError(b, err)
	rt, err := executecode.New(cfg, executecode.WithRoot(b.TempDir()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// awaitWarm waits, untimed, until rt's snapshot counts n warm
// interpreters (a runtime without the count waits for nothing).
func awaitWarm(b *testing.B, rt *executecode.Runtime, n int) {
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := rt.Snapshot(context.Background())
		require.NoError(b, err)
		raw, _ := json.Marshal(s)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		got, ok := m["warm_interpreters"].(float64)
		if !ok || int(got) >= n {
			return
		}
		require.True(b, time.Now().Before(deadline), "no warm interpreter")
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkWarmInterpreters measures, through the facade and alternating
// in one run, a per-call run of text('hi') and a new kernel's first result
// (x = 1) with warm_interpreters = 1 and = 0, and reports the medians and
// the cold/warm ratios. Before every call, untimed, both warm runtimes'
// pools are full again, so no replacement still in its start-up slows
// the call measured.
func BenchmarkWarmInterpreters(b *testing.B) {
	const rounds = 15
	perCall := map[int]*executecode.Runtime{1: warmRuntime(b, config.PerCall, 1), 0: warmRuntime(b, config.PerCall, 0)}
	session := map[int]*executecode.Runtime{1: warmRuntime(b, config.Session, 1), 0: warmRuntime(b, config.Session, 0)}
	ctx := context.Background()
	for b.Loop() {
		runs := map[int][]time.Duration{}
		kernels := map[int][]time.Duration{}
		for i := range rounds {
			settle := func() { awaitWarm(b, perCall[1], 1); awaitWarm(b, session[1], 1) }
			for _, n := range []int{1, 0} {
				rt := perCall[n]
				settle()
				start := time.Now()
				res, err := rt.Execute(ctx, executecode.Call{Script: "text('hi')"})
				runs[n] = append(runs[n], time.Since(start))
				require.NoError(b, err)
				require.Equal(b, []string{"hi"}, res.Blocks, res.Text())

				rt = session[n]
				settle()
				owner, err := rt.Attach(ctx, executecode.Scope{SessionID: "bench-" + strconv.Itoa(i), AgentID: "main"})
				require.NoError(b, err)
				start = time.Now()
				res, err = rt.Execute(ctx, executecode.Call{Script: "x = 1", Owner: owner})
				kernels[n] = append(kernels[n], time.Since(start))
				require.NoError(b, err)
				require.True(b, res.Succeeded(), res.Text())
				require.NoError(b, owner.Detach(ctx))
			}
		}
		b.ReportMetric(medianMS(runs[1]), "percall-warm-ms")
		b.ReportMetric(medianMS(runs[0]), "percall-cold-ms")
		b.ReportMetric(medianMS(runs[0])/medianMS(runs[1]), "percall-cold/warm")
		b.ReportMetric(medianMS(kernels[1]), "newkernel-warm-ms")
		b.ReportMetric(medianMS(kernels[0]), "newkernel-cold-ms")
		b.ReportMetric(medianMS(kernels[0])/medianMS(kernels[1]), "newkernel-cold/warm")
	}
}
