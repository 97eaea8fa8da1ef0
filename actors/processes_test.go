package actors

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liveHeap is the heap's live bytes after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// churn does what n attach/detach cycles of an owner without cells do to
// the tree: an owner actor, a request to the registry, a stop.
func churn(t *testing.T, tree *Tree, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		o, err := tree.Registry.Attach(ctx)
		require.NoError(t, err)
		require.NoError(t, tree.Registry.Detach(ctx, o))
	}
}

// Every actor and future registers a fresh id in protoactor's process
// registry and is removed when it ends; what the registry keeps for ended
// ids must not add up. (Stock protoactor spreads ids over 32,768 shard
// maps that keep their storage once used: these 30,000 ids would leave
// about 5 MB behind.)
func TestEndedActorsAndFuturesLeaveTheHeapFlat(t *testing.T) {
	tree, _ := startTree(t)
	churn(t, tree, 500)
	before := liveHeap()
	const cycles = 10000
	churn(t, tree, cycles)
	after := liveHeap()
	growth := int64(after) - int64(before)
	t.Logf("heap %d -> %d bytes over %d owner cycles (%+.1f B/cycle)", before, after, cycles, float64(growth)/cycles)
	assert.Less(t, growth, int64(256<<10), "heap growth over %d owner cycles", cycles)
	require.NoError(t, tree.Shutdown(context.Background()))
}
