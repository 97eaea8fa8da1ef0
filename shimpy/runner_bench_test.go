package shimpy

import (
	"strconv"
	"testing"
)

// BenchmarkCellRoundTrip measures one `x = 1` cell on a warm kernel: the
// eval request written, started and done read back.
func BenchmarkCellRoundTrip(b *testing.B) {
	k := startKernel(b, kernelOptions{})
	k.init(b)
	b.ResetTimer()
	for i := range b.N {
		k.eval(b, "c"+strconv.Itoa(i), "x = 1", nil)
	}
}

// BenchmarkKernelToFirstResult measures a new runner from spawn to the
// done of its first cell (staging included).
func BenchmarkKernelToFirstResult(b *testing.B) {
	for range b.N {
		k := startKernel(b, kernelOptions{})
		k.init(b)
		k.eval(b, "c1", "x = 1", nil)
		b.StopTimer()
		k.close()
		b.StartTimer()
	}
}
