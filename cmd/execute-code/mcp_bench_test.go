package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkMCPCellAgainstServe runs the cell `x = 1` on one session
// kernel through `execute-code mcp` (the SDK's client) and through
// `serve` (JSON lines), alternately, in one run: mcp/serve is the cost
// of the protocol.
func BenchmarkMCPCellAgainstServe(b *testing.B) {
	ctx := context.Background()
	c := connectMCP(b, nil)
	c.call(b, ctx, map[string]any{"script": "x = 1"}, nil) // the kernel starts

	tmp := b.TempDir()
	cmd := exec.Command(binary, "serve", "--root", tmp)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	in, err := cmd.StdinPipe()
	require.NoError(b, err)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	lines := bufio.NewScanner(out)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	serveCall := func(line string) {
		_, err := io.WriteString(in, line+"\n")
		require.NoError(b, err)
		require.True(b, lines.Scan())
	}
	serveCall(`{"id":0,"op":"attach","session":"s","agent":"a"}`)
	serveCall(`{"id":0,"op":"execute","session":"s","script":"x = 1"}`)
	defer func() {
		_ = in.Close()
		_ = cmd.Wait()
	}()

	var overMCP, overServe time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r := c.call(b, ctx, map[string]any{"script": "x = 1"}, nil)
		overMCP += time.Since(t0)
		require.False(b, r.IsError)
		t0 = time.Now()
		serveCall(fmt.Sprintf(`{"id":%d,"op":"execute","session":"s","script":"x = 1"}`, i+1))
		overServe += time.Since(t0)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(overMCP.Microseconds())/n, "mcp-µs/cell")
	b.ReportMetric(float64(overServe.Microseconds())/n, "serve-µs/cell")
	b.ReportMetric(float64(overMCP)/float64(overServe), "mcp/serve")
}
