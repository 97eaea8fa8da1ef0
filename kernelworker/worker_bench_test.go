package kernelworker

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
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

// BenchmarkParserStream feeds 1 MiB of cell output as the runner frames it
// (64 KiB chunks, base64) in 64 KiB reads, with the stream fast path and,
// as the baseline in the same run, without it.
func BenchmarkParserStream(b *testing.B) {
	head := fr(`{"v":1,"type":"ready"}`) + fr(`{"v":1,"type":"started","id":"c1"}`)
	chunk := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("output line\n"), MaxStreamChunk/12))
	var body strings.Builder
	for range (1 << 20) / MaxStreamChunk {
		body.WriteString(fr(`{"v":1,"type":"stream","id":"c1","stream":"stdout","data":"` + chunk + `"}`))
	}
	stream := []byte(body.String())
	for _, v := range []struct {
		name     string
		slowOnly bool
	}{{"fast", false}, {"general", true}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				p := Parser{slowOnly: v.slowOnly}
				if _, err := p.Feed([]byte(head)); err != nil {
					b.Fatal(err)
				}
				for off := 0; off < len(stream); off += 64 << 10 {
					if _, err := p.Feed(stream[off:min(off+64<<10, len(stream))]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
