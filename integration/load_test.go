package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// loadParam reads a positive integer from the environment, or def.
func loadParam(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}

// TestLoadConcurrentSessions runs LOAD_SESSIONS sessions at once (8), each
// sending LOAD_CELLS cells (200) one after the other, each cell making
// LOAD_CALLS helper calls (5). It reports cells/s, helper calls/s and the
// cell latency percentiles, and fails if any cell failed. It only runs
// with LOAD=1 (`make load`): it measures, it does not belong in `make test`.
func TestLoadConcurrentSessions(t *testing.T) {
	if os.Getenv("LOAD") != "1" {
		t.Skip("set LOAD=1 (make load) to run the load test")
	}
	sessions := loadParam(t, "LOAD_SESSIONS", 8)
	cells := loadParam(t, "LOAD_CELLS", 200)
	calls := loadParam(t, "LOAD_CALLS", 5)
	e := sessionEnv(t, map[string]string{"small.txt": "hello\nworld\n"})
	script := fmt.Sprintf("n = globals().get('n', 0)\nfor _ in range(%d):\n    read('small.txt')\nn += 1\ntext(str(n))\n", calls)

	latencies := make([][]time.Duration, sessions)
	var failures sync.Map
	var wg sync.WaitGroup
	start := time.Now()
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := e.rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprintf("load-%d", s), AgentID: "main"})
			if err != nil {
				failures.Store(fmt.Sprintf("session %d attach", s), err.Error())
				return
			}
			defer func() { _ = o.Detach(context.Background()) }()
			for c := range cells {
				t0 := time.Now()
				res, err := e.rt.Execute(context.Background(), executecode.Call{Script: script, Owner: o, TimeoutMS: 60000})
				latencies[s] = append(latencies[s], time.Since(t0))
				if problem := loadProblem(res, err, c, calls); problem != "" {
					failures.Store(fmt.Sprintf("session %d cell %d", s, c), problem)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var failed []string
	failures.Range(func(k, v any) bool {
		failed = append(failed, fmt.Sprintf("%s: %s", k, v))
		return len(failed) < 10
	})
	require.NotEmpty(t, all)
	total := sessions * cells
	t.Logf("load: %d sessions x %d cells x %d helper calls in %s", sessions, cells, calls, elapsed.Round(time.Millisecond))
	t.Logf("load: %.0f cells/s, %.0f helper calls/s", float64(len(all))/elapsed.Seconds(), float64(len(all)*calls)/elapsed.Seconds())
	t.Logf("load: cell latency p50 %s, p99 %s, max %s", pct(all, 50), pct(all, 99), all[len(all)-1].Round(time.Microsecond))
	t.Logf("load: %d of %d cells failed", len(failed), total)
	assert.Equal(t, total, len(all), "every cell was sent")
	assert.Empty(t, failed, "no cell may fail:\n%s", strings.Join(failed, "\n"))
}

// loadProblem says what is wrong with cell c's result, or "".
func loadProblem(res executecode.Result, err error, c, calls int) string {
	switch {
	case err != nil:
		return err.Error()
	case res.Details == nil:
		return res.Text()
	case res.Details.Reason != "" || res.Details.KilledBy != "" || res.Details.FallbackReason != "":
		return res.Text()
	case res.Details.RPCCalls != calls || res.Details.RPCErrors != 0:
		return fmt.Sprintf("%d helper calls, %d errors", res.Details.RPCCalls, res.Details.RPCErrors)
	case len(res.Blocks) != 1 || res.Blocks[0] != strconv.Itoa(c+1):
		return fmt.Sprintf("state lost: blocks %q", res.Blocks)
	}
	return ""
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	i = min(max(i-1, 0), len(sorted)-1)
	return sorted[i].Round(time.Microsecond)
}
