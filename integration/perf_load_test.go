package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// The load of `make load`, scaled down to fit make bench: perfLoadSessions
// sessions at once, each sending perfLoadCells cells one after the other,
// each cell making perfLoadCalls helper calls.
const (
	perfLoadSessions = 8
	perfLoadCells    = 25
	perfLoadCalls    = 5
)

// BenchmarkPerfLoad reports the cells/s and the cell latency p99 of the
// concurrent load, on warm kernels (each session's kernel has started
// before the clock does), against its baseline in the same run: the same
// cells sent by one session alone. load/single-throughput is what
// concurrency gains (bounded by the cores, 2 here), load-p99/single-median
// what it costs a cell.
func BenchmarkPerfLoad(b *testing.B) {
	e := newPerfEnv(b, smallFile, func(c *config.Config) { c.KernelMode = config.Session })
	script := fmt.Sprintf("n = globals().get('n', 0)\nfor _ in range(%d):\n    read('small.txt')\nn += 1\ntext(str(n))\n", perfLoadCalls)
	owners := make([]*executecode.Owner, perfLoadSessions)
	counts := make([]int, perfLoadSessions)
	for s := range owners {
		o, err := e.rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprintf("load-%d", s), AgentID: "main"})
		require.NoError(b, err)
		owners[s] = o
	}
	defer func() {
		for _, o := range owners {
			require.NoError(b, o.Detach(context.Background()))
		}
	}()
	// cells sends n cells on session s and returns their latencies; a
	// failed cell is recorded, not fatal, so the other sessions finish.
	var failMu sync.Mutex
	var failures []string
	cells := func(s, n int) []time.Duration {
		ds := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			res, err := e.rt.Execute(context.Background(), executecode.Call{Script: script, Owner: owners[s], TimeoutMS: 60000})
			ds = append(ds, time.Since(t0))
			if problem := loadProblem(res, err, counts[s], perfLoadCalls); problem != "" {
				failMu.Lock()
				failures = append(failures, fmt.Sprintf("session %d cell %d: %s", s, counts[s], problem))
				failMu.Unlock()
			}
			counts[s]++
		}
		return ds
	}
	for s := range owners {
		cells(s, 1) // each kernel starts
	}
	for b.Loop() {
		t0 := time.Now()
		single := cells(0, perfLoadCells)
		singleRate := float64(perfLoadCells) / time.Since(t0).Seconds()

		lat := make([][]time.Duration, perfLoadSessions)
		var wg sync.WaitGroup
		t0 = time.Now()
		for s := range owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lat[s] = cells(s, perfLoadCells)
			}()
		}
		wg.Wait()
		rate := float64(perfLoadSessions*perfLoadCells) / time.Since(t0).Seconds()
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		require.Empty(b, failures)
		p99, singleMed := ms(percentile(all, 99)), ms(median(single))
		b.ReportMetric(rate, "load-cells/s")
		b.ReportMetric(ms(median(all)), "load-p50-ms")
		b.ReportMetric(p99, "load-p99-ms")
		b.ReportMetric(singleRate, "single-cells/s")
		b.ReportMetric(singleMed, "single-median-ms")
		b.ReportMetric(rate/singleRate, "load/single-throughput-ratio")
		b.ReportMetric(p99/singleMed, "load-p99/single-median-ratio")
	}
}
