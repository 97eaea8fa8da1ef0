package kernelworker

import (
	"testing"
	"time"

	"github.com/executecode/executecode/internal/proc"
)

// BenchmarkNewKernelWarmVersusCold measures a new kernel's Start to its
// first cell's result (x = 1) with a warm interpreter waiting for it
// (the Spawner keeps one of the kernel's shape, and each start waits,
// untimed, until it is ready) and with none, alternating in one run, and
// reports both medians and their ratio.
func BenchmarkNewKernelWarmVersusCold(b *testing.B) {
	h := newKernelHarness(b)
	sp := h.opts.Spawner
	cold := func() (proc.Command, bool) { return proc.Command{}, false }
	warm := func() (proc.Command, bool) { return Command(h.opts), true }
	once := func(keep bool) time.Duration {
		if keep {
			sp.KeepWarm(1, 0, warm)
			deadline := time.Now().Add(time.Minute)
			for sp.Warm() < 1 {
				if time.Now().After(deadline) {
					b.Fatal("no warm interpreter")
				}
				time.Sleep(time.Millisecond)
			}
		} else {
			sp.KeepWarm(0, 0, cold)
		}
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
		warmTook = append(warmTook, once(true))
		coldTook = append(coldTook, once(false))
	}
	w, c := median(warmTook), median(coldTook)
	b.ReportMetric(float64(w.Microseconds()), "warm-median-us")
	b.ReportMetric(float64(c.Microseconds()), "cold-median-us")
	b.ReportMetric(float64(c)/float64(max(w, 1)), "cold/warm-ratio")
}
