package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
)

// BenchmarkSessionCellFloor measures a warm session cell of `x = 1`
// through the facade (registry lease, cell bridge, RPC server, kernel
// worker, runner, result) against the floor of any such cell, a one-byte
// ping-pong between the host and an idle python3 of the same interpreter.
// The two alternate, one cell then one ping-pong, so that the machine's
// load falls on both alike and each finds its python as a cell finds its
// kernel: idle (a ping-pong kept busy back to back never lets either side
// sleep, and measures a fraction of this). The ratio is the figure to
// compare across machines. Back to back, each sample follows the other at
// once, as BenchmarkSessionCell's cells do; paused, each follows the same
// pause, as a model's turns do: the runtime's work between cells is over,
// and every thread of the host and of both pythons has gone to sleep.
func BenchmarkSessionCellFloor(b *testing.B) {
	root := b.TempDir()
	cfg := config.Defaults()
	cfg.Enabled, cfg.KernelMode = true, config.Session
	rt, err := executecode.New(cfg, executecode.WithRoot(root))
	require.NoError(b, err)
	defer rt.Close(context.Background())
	python, err := proc.ResolvePython("")
	require.NoError(b, err)
	floor := startPipeFloor(b, python)

	owner, err := rt.Attach(context.Background(), executecode.Scope{SessionID: "bench", AgentID: "main"})
	require.NoError(b, err)
	defer func() { require.NoError(b, owner.Detach(context.Background())) }()
	call := executecode.Call{Script: "x = 1", Owner: owner}
	var cellCPU time.Duration
	cell := func() time.Duration {
		cpu0 := hostCPU()
		start := time.Now()
		res, err := rt.Execute(context.Background(), call)
		took := time.Since(start)
		cellCPU += hostCPU() - cpu0
		require.NoError(b, err)
		require.True(b, res.Details.KernelReused != nil && *res.Details.KernelReused, res.Text())
		return took
	}
	_, err = rt.Execute(context.Background(), call) // the kernel's start
	require.NoError(b, err)
	for range 50 { // warm both: imports, first-cell costs, caches
		cell()
		floor.roundTrip(b)
	}
	const samples = 500
	for _, regime := range []struct {
		name string
		gap  time.Duration
	}{{"back-to-back", 0}, {"paused", time.Millisecond}} {
		b.Run(regime.name, func(b *testing.B) {
			for b.Loop() {
				var cells, floors []time.Duration
				cellCPU = 0
				for range samples {
					if regime.gap > 0 {
						time.Sleep(regime.gap)
					}
					cells = append(cells, cell())
					if regime.gap > 0 {
						time.Sleep(regime.gap)
					}
					floors = append(floors, floor.roundTrip(b))
				}
				c, f := us(median(cells)), us(median(floors))
				b.ReportMetric(c, "warm-cell-median-us")
				b.ReportMetric(float64(cells[len(cells)*99/100].Microseconds()), "warm-cell-p99-us")
				b.ReportMetric(f, "floor-median-us")
				b.ReportMetric(c/f, "cell/floor-ratio")
				b.ReportMetric(float64(cellCPU.Microseconds())/samples, "host-cpu-us/cell")
			}
		})
	}
}
