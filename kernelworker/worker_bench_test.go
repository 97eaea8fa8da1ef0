package kernelworker

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkCellRoundTrip measures one trivial cell (x = 1) on a warm
// kernel: Execute sent, eval written, started/done parsed, result back.
func BenchmarkCellRoundTrip(b *testing.B) {
	h := newKernelHarness(b)
	pid := h.start()
	for range 20 { // warm the kernel: imports, first-cell costs
		if res := h.run(pid, "x = 1"); res.Reason != "" {
			b.Fatalf("warm-up cell failed: %+v", res)
		}
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res := h.run(pid, "x = 1")
		took = append(took, time.Since(start))
		if res.Reason != "" {
			b.Fatalf("cell failed: %+v", res)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(median(took).Microseconds()), "median-us")
}

// BenchmarkNewKernelFirstResult measures a cold kernel: Start (workspace,
// staging, spawn, init) to the first cell's result, then its stop.
func BenchmarkNewKernelFirstResult(b *testing.B) {
	h := newKernelHarness(b)
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		pid := h.start()
		res := h.run(pid, "x = 1")
		took = append(took, time.Since(start))
		if res.Reason != "" {
			b.Fatalf("cell failed: %+v", res)
		}
		b.StopTimer()
		h.system.Root.Send(pid, &Stop{Reason: KilledByShutdown})
		h.waitGone(pid)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(median(took).Microseconds()), "median-us")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
