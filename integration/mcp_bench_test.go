package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// mcpRoundTripScript reads one small file CALLS times through the
// built-in read and CALLS times through the filesystem server, the two
// interleaved so both see the same machine, and reports each one's
// median wall time in microseconds, measured inside python.
const mcpRoundTripScript = `
import time
builtin, viamcp = [], []
path = ROOT + "/small.txt"
for _ in range(CALLS):
    t = time.perf_counter_ns()
    read("small.txt")
    builtin.append(time.perf_counter_ns() - t)
    t = time.perf_counter_ns()
    fs_read_text_file(path=path)
    viamcp.append(time.perf_counter_ns() - t)
builtin.sort()
viamcp.sort()
text("%d %d" % (builtin[len(builtin) // 2] // 1000, viamcp[len(viamcp) // 2] // 1000))
`

// BenchmarkMCPHelperRoundTrip measures one helper call through an MCP
// tool source (the filesystem server's read_text_file: the bridge, the
// SDK's client, stdio, node) against the built-in read of the same file,
// side by side in one run, and reports the ratio; and the same call made
// from Go with the SDK alone, the server's own share.
func BenchmarkMCPHelperRoundTrip(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(filepath.Join(root, "small.txt"), []byte("hello\nworld\n"), 0o644))
	const calls = 300
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.MaxRPCCalls = 2*calls + 10
	rt, err := executecode.New(cfg, executecode.WithRoot(root), executecode.WithMCPServer("fs", filesystemServer(b), root))
	require.NoError(b, err)
	defer rt.Close(context.Background())
	script := strings.NewReplacer("CALLS", strconv.Itoa(calls), "ROOT", strconv.Quote(root)).Replace(mcpRoundTripScript)
	direct := directMCPCall(b, root)
	for b.Loop() {
		res, err := rt.Execute(context.Background(), executecode.Call{Script: script, TimeoutMS: 120000})
		require.NoError(b, err)
		require.Len(b, res.Blocks, 1, res.Text())
		f := strings.Fields(res.Blocks[0])
		builtin, _ := strconv.ParseFloat(f[0], 64)
		viaMCP, _ := strconv.ParseFloat(f[1], 64)
		b.ReportMetric(builtin, "read-median-us")
		b.ReportMetric(viaMCP, "mcp-median-us")
		b.ReportMetric(viaMCP/builtin, "mcp/read-ratio")
		b.ReportMetric(direct(calls), "sdk-direct-median-us")
	}
}

// directMCPCall is the server's own share: the same call made from Go
// with the SDK alone, no script and no bridge. It returns the median of
// n calls in microseconds.
func directMCPCall(b *testing.B, root string) func(n int) float64 {
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(filesystemServer(b), root)}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = sess.Close() })
	params := &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "small.txt")}}
	return func(n int) float64 {
		ds := make([]time.Duration, n)
		for i := range ds {
			start := time.Now()
			_, err := sess.CallTool(ctx, params)
			require.NoError(b, err)
			ds[i] = time.Since(start)
		}
		slices.Sort(ds)
		return float64(ds[n/2].Microseconds())
	}
}
