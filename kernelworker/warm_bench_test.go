package kernelworker

import (
	"testing"
	"time"

	"github.com/executecode/executecode/internal/proc"
)

// BenchmarkNewKernelWarmVersusCold measures a new kernel's Start to its
// first cell's result (x = 1) with a warm interpreter waiting for it (one
// Spawner keeps one of the kernel's shape) and with none (a Spawner of
// its own, with no pool), alternating in one run, and reports both
// medians and their ratio. Before every start, untimed, the warm pool is
// full again: no replacement is still in its start-up to slow either.
func BenchmarkNewKernelWarmVersusCold(b *testing.B) {
	warm := newKernelHarness(b)
	cold := newKernelHarness(b)
	sp := warm.opts.Spawner
	sp.KeepWarm(1, 0, func() (proc.Command, bool) { return Command(warm.opts), true })
	settle := func() {
		deadline := time.Now().Add(time.Minute)
		for sp.Warm() < 1 {
			if time.Now().After(deadline) {
				b.Fatal("no warm interpreter")
			}
			time.Sleep(time.Millisecond)
		}
	}
	once := func(h *kernelHarness) time.Duration {
		settle()
		start := time.Now()
		pid := h.start()
		res := h.run(pid, "x = 1")
		took := time.Since(start)
		if res.Reason != "" {
			b.Fatalf("cell failed: %+v", res)
		}
		h.system.Root.Send(pid, &Stop{Reason: KilledByShutdown})
		h.waitGone(pid)
		return took
	}
	var warmTook, coldTook []time.Duration
	for b.Loop() {
		warmTook = append(warmTook, once(warm))
		coldTook = append(coldTook, once(cold))
	}
	w, c := median(warmTook), median(coldTook)
	b.ReportMetric(float64(w.Microseconds()), "warm-median-us")
	b.ReportMetric(float64(c.Microseconds()), "cold-median-us")
	b.ReportMetric(float64(c)/float64(max(w, 1)), "cold/warm-ratio")
}
