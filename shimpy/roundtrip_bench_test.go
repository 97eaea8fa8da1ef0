package shimpy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/pump"
)

// BenchmarkHelperRoundTrip measures read() through the doorbells against
// a host that wakes on the request bell, as the pump does. The script
// times its own calls, so interpreter start-up is not counted; the metric
// is the median of one call.
func BenchmarkHelperRoundTrip(b *testing.B) {
	s := newStage(b, []string{"read"}, 0, childBells)
	requestRead, requestWrite, err := os.Pipe()
	require.NoError(b, err)
	responseRead, responseWrite, err := os.Pipe()
	require.NoError(b, err)
	defer func() {
		_ = requestRead.Close()
		_ = responseWrite.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveOnRing(s.rpc, requestRead, responseWrite)
	}()
	script := fmt.Sprintf(`
import time
samples = []
for i in range(%d):
    t0 = time.perf_counter_ns()
    read("x")
    samples.append(time.perf_counter_ns() - t0)
samples.sort()
print(samples[len(samples) // 2])
`, max(b.N, 100))
	b.ResetTimer()
	p := s.start(b, script, requestWrite, responseRead)
	_ = requestWrite.Close()
	_ = responseRead.Close()
	o := p.wait()
	b.StopTimer()
	wg.Wait()
	require.Equal(b, 0, o.exit, o.output)
	var median float64
	_, err = fmt.Sscan(strings.TrimSpace(o.output), &median)
	require.NoError(b, err, o.output)
	b.ReportMetric(median, "ns/call-median")
}

// serveOnRing answers requests in id order with "ok" each time the
// request bell rings, until the shim's end of the bell closes. It opens
// names directly rather than listing a directory that grows by one
// response per call, so the metric is the bridge, not the scan: it knows
// the body read("x") publishes, hence the request's authenticated name.
func serveOnRing(rpc string, requestBell, responseBell *os.File) {
	buf := make([]byte, 512)
	next := 1
	for {
		if _, err := requestBell.Read(buf); err != nil {
			return
		}
		for {
			id := strconv.Itoa(next)
			claim := filepath.Join(rpc, "req-"+id+".claim")
			body := []byte(`{"id": ` + id + `, "tool": "read", "params": {"path": "x"}}`)
			if os.Rename(filepath.Join(rpc, pump.RequestName(testToken, int64(next), body)), claim) != nil {
				break
			}
			tmp := filepath.Join(rpc, ".res-"+id+"--bench")
			_ = os.WriteFile(tmp, authenticateBytes(testToken, next, []byte(`{"id": `+id+`, "ok": true, "content": "ok"}`)), 0o600)
			_ = os.Rename(tmp, filepath.Join(rpc, "res-"+id+".json"))
			_ = os.Remove(claim)
			_, _ = responseBell.Write([]byte{1})
			next++
		}
	}
}
