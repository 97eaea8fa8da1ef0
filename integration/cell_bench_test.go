package integration

import (
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
)

// pingPongScript echoes each byte of its stdin back on its stdout, one
// read and one write at a time: the least a cell's round trip between the
// host and a python process can cost.
const pingPongScript = `
import os
while True:
    b = os.read(0, 1)
    if not b:
        break
    os.write(1, b)
`

// pipeFloor is a python3 that answers one byte with one byte over two
// pipes, as a kernel's request and frame channels carry a cell.
type pipeFloor struct {
	cmd *exec.Cmd
	in  *os.File
	out *os.File
	buf [1]byte
}

func startPipeFloor(b *testing.B, python string) *pipeFloor {
	b.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(b, err)
	outR, outW, err := os.Pipe()
	require.NoError(b, err)
	cmd := exec.Command(python, "-I", "-S", "-c", pingPongScript)
	cmd.Stdin, cmd.Stdout = inR, outW
	require.NoError(b, cmd.Start())
	_ = inR.Close()
	_ = outW.Close()
	f := &pipeFloor{cmd: cmd, in: inW, out: outR}
	b.Cleanup(func() {
		_ = f.in.Close()
		_ = f.cmd.Wait()
		_ = f.out.Close()
	})
	return f
}

// roundTrip is one byte to python and its echo back.
func (f *pipeFloor) roundTrip(b *testing.B) time.Duration {
	start := time.Now()
	_, err := f.in.Write([]byte{'x'})
	require.NoError(b, err)
	_, err = io.ReadFull(f.out, f.buf[:])
	require.NoError(b, err)
	return time.Since(start)
}

// processCPU is the CPU time the host process has used so far, in user
// and system mode, on every thread.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func medianUS(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Nanoseconds()) / 1000
}

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
	var hostCPU time.Duration
	cell := func() time.Duration {
		cpu0 := processCPU(b)
		start := time.Now()
		res, err := rt.Execute(context.Background(), call)
		took := time.Since(start)
		hostCPU += processCPU(b) - cpu0
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
				hostCPU = 0
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
				c, f := medianUS(cells), medianUS(floors)
				slices.Sort(cells)
				b.ReportMetric(c, "warm-cell-median-us")
				b.ReportMetric(float64(cells[len(cells)*99/100].Microseconds()), "warm-cell-p99-us")
				b.ReportMetric(f, "floor-median-us")
				b.ReportMetric(c/f, "cell/floor-ratio")
				b.ReportMetric(float64(hostCPU.Microseconds())/samples, "host-cpu-us/cell")
			}
		})
	}
}
