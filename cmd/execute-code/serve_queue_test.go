package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answers collects n answers (notifications skipped) by id, in the order
// they came.
func (p *serveProc) answers(n int) (map[float64]map[string]any, []float64) {
	p.t.Helper()
	got := map[float64]map[string]any{}
	var order []float64
	for len(got) < n {
		a := p.answer()
		id, ok := a["id"].(float64)
		require.True(p.t, ok, "an answer without a numeric id: %v", a)
		got[id] = a
		order = append(order, id)
	}
	return got, order
}

func details(t *testing.T, a map[string]any) map[string]any {
	t.Helper()
	res, ok := a["result"].(map[string]any)
	require.True(t, ok, "not a result: %v", a)
	return res["details"].(map[string]any)
}

// serve hands each execute to the kernel's FIFO at once: with one cell
// running and one queued (a queue of one), the next is refused as
// queue_full while the first still runs, and the queued one runs after
// the first, in arrival order.
func TestServeFullKernelQueueAnswersAtOnce(t *testing.T) {
	p := startServeIn(t, t.TempDir(), []string{"LEMON_EXECUTE_CODE_MAX_QUEUED_CELLS_PER_KERNEL=1"})
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.send(`{"id":2,"op":"execute","session":"s","script":"order = ['warm']\ntext('warm')"}`)
	got, _ := p.answers(2)
	require.Equal(t, []any{"warm"}, blocks(t, got[2]))

	p.send(`{"id":3,"op":"execute","session":"s","script":"import time\ntime.sleep(3)\norder.append('first')\ntext('first')"}`)
	p.send(`{"id":4,"op":"execute","session":"s","script":"order.append('second')\ntext(','.join(order))"}`)
	sent := time.Now()
	p.send(`{"id":5,"op":"execute","session":"s","script":"order.append('third')\ntext('third ran')"}`)
	refused := p.answer()
	t.Logf("queue_full answered %s after it was sent", time.Since(sent).Round(time.Millisecond))
	assert.Equal(t, 5.0, refused["id"], "the refusal comes while the first cell still runs")
	assert.Equal(t, "queue_full", details(t, refused)["reason"])
	// The two answers may come in either order (each call finishes on
	// its own goroutine); the order the cells ran in is in their blocks.
	got, _ = p.answers(2)
	assert.Equal(t, []any{"first"}, blocks(t, got[3]))
	assert.Equal(t, []any{"warm,first,second"}, blocks(t, got[4]), "the refused cell never ran")
}

// A queued cell whose deadline passes leaves the queue without running:
// behind a 3 s cell, a cell with timeout_ms 1000 is answered timed out
// while the first still runs, and its side effect never happens.
func TestServeQueuedCellTimesOutWithoutRunning(t *testing.T) {
	p := startServe(t)
	root := p.cmd.Args[3]
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.send(`{"id":2,"op":"execute","session":"s","script":"x = 1"}`)
	p.answers(2)
	p.send(`{"id":3,"op":"execute","session":"s","script":"import time\ntime.sleep(3)\ntext('slow')"}`)
	sent := time.Now()
	p.send(`{"id":4,"op":"execute","session":"s","timeout_ms":1000,"script":"open('side-effect', 'w').close()\ntext('ran')"}`)
	first := p.answer()
	t.Logf("the queued cell timed out %s after it was sent", time.Since(sent).Round(time.Millisecond))
	require.Equal(t, 4.0, first["id"], "the queued cell is answered while the first still runs")
	got, _ := p.answers(1)
	got[4] = first
	d := details(t, got[4])
	assert.Equal(t, "timeout", d["reason"])
	assert.Equal(t, "timeout", d["killed_by"])
	assert.Equal(t, true, d["state_retained"], "the kernel was not touched")
	assert.Empty(t, blocks(t, got[4]))
	assert.Equal(t, []any{"slow"}, blocks(t, got[3]))
	p.send(`{"id":5,"op":"execute","session":"s","script":"text(str(x))"}`)
	got, _ = p.answers(1)
	assert.Equal(t, []any{"1"}, blocks(t, got[5]), "the session kept its state")
	_, err := os.Stat(filepath.Join(root, "side-effect"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the timed-out queued cell never ran")
}
