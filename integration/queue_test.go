package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// The kernel's queue, reached through the Go API: with one cell running
// and one queued, a third is refused at once as queue_full; the queued
// one runs after the first.
func TestAFullKernelQueueRefusesAtOnce(t *testing.T) {
	e := sessionEnv(t, nil, withConfig(func(c *config.Config) { c.MaxQueuedCellsPerKernel = 1 }))
	o := e.attach("s1")
	e.cell(o, "x = 1")
	first := make(chan executecode.Result, 1)
	// The first cell runs until the test has its refusal: it waits for a
	// file only the test makes, so "still running" holds however slow
	// the machine is.
	gate := filepath.Join(t.TempDir(), "gate")
	go func() {
		first <- e.cell(o, fmt.Sprintf("import os, time\nwhile not os.path.exists(%q):\n    time.sleep(0.005)\ntext('first')", gate))
	}()
	// Running and queued in the kernel's worker, not merely leased: a
	// leased call has yet to reach the worker, and a later one may get
	// there first.
	waitSnapshot(t, e, func(s executecode.Snapshot) bool { return s.Phases["running"] == 1 })
	second := make(chan executecode.Result, 1)
	go func() { second <- e.cell(o, "text('second')") }()
	waitSnapshot(t, e, func(s executecode.Snapshot) bool { return s.Queues.Queued == 1 })

	started := time.Now()
	res := e.cell(o, "open('third', 'w').close()")
	took := time.Since(started)
	assert.Equal(t, executecode.ReasonQueueFull, res.Details.Reason, res.Text())
	t.Logf("queue_full answered in %s", took)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	assert.Equal(t, []string{"first"}, (<-first).Blocks)
	assert.Equal(t, []string{"second"}, (<-second).Blocks)
	_, err := os.Stat(filepath.Join(e.root, "third"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the refused cell never ran")
}
