package mcpserve_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/mcpserve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An embedder serves the same server over transports of its own: each
// connection is its own session, and Close detaches them all.
func TestEachConnectionIsASessionAndCloseDetachesThem(t *testing.T) {
	cfg := config.Defaults()
	cfg.Enabled, cfg.KernelMode = true, config.Session
	rt, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()), executecode.WithApprover(mcpserve.Approver(nil)))
	require.NoError(t, err)
	defer rt.Close(context.Background())
	srv := mcpserve.New(rt, "test")

	ctx := context.Background()
	connect := func() *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		_, err := srv.MCP().Connect(ctx, st, nil)
		require.NoError(t, err)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
		require.NoError(t, err)
		return cs
	}
	call := func(cs *mcp.ClientSession, script string) []any {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"script": script}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		blocks, _ := res.StructuredContent.(map[string]any)["blocks"].([]any)
		return blocks
	}
	a, b := connect(), connect()
	call(a, "x = 'a'")
	call(b, "x = 'b'")
	assert.Equal(t, []any{"a"}, call(a, "text(x)"))
	assert.Equal(t, []any{"b"}, call(b, "text(x)"))
	snap, err := rt.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, snap.Capacity.Live, "one kernel per connection")

	require.NoError(t, a.Close())
	assert.Eventually(t, func() bool {
		s, err := rt.Snapshot(ctx)
		return err == nil && s.Capacity.Live == 1
	}, 10*time.Second, 20*time.Millisecond, "a closed connection's kernel stops")
	srv.Close()
	_ = b.Close()
	s, err := rt.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, s.Capacity.Live, "Close detaches every connection")
}
