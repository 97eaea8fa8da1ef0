package kernelworker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientRunsCellsOnItsWorker(t *testing.T) {
	h := newKernelHarness(t)
	c := NewClient(h.system.Root, h.start())
	first := h.result(c.Execute(context.Background(), Cell{Code: "x = 41", Timeout: 10 * time.Second}))
	require.Empty(t, first.Reason)
	second := h.result(c.Execute(context.Background(), Cell{Code: "print(x + 1)", Timeout: 10 * time.Second}))
	require.Empty(t, second.Reason)
	assert.Equal(t, "42\n", second.Output.Text)
	assert.Equal(t, 2, second.CellsCompleted)
}

// The caller's ctx is the cell's: one already done never runs, and the
// kernel keeps its state.
func TestClientCellOfAGoneCallerNeverRuns(t *testing.T) {
	h := newKernelHarness(t)
	c := NewClient(h.system.Root, h.start())
	require.Empty(t, h.result(c.Execute(context.Background(), Cell{Code: "x = 1", Timeout: 10 * time.Second})).Reason)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	res := h.result(c.Execute(gone, Cell{Code: "x = 2", Timeout: 10 * time.Second}))
	assert.Equal(t, ReasonInterrupted, res.Reason)
	assert.Empty(t, res.RequestID, "it was never dispatched")
	after := h.result(c.Execute(context.Background(), Cell{Code: "print(x)", Timeout: 10 * time.Second}))
	assert.Equal(t, "1\n", after.Output.Text)
}

func TestZeroClientAnswersInvalidRequestAtOnce(t *testing.T) {
	res := <-Client{}.Execute(context.Background(), Cell{Code: "x = 1", Timeout: time.Second})
	assert.Equal(t, ReasonInvalidRequest, res.Reason)
	assert.Nil(t, Client{}.PID())
}
