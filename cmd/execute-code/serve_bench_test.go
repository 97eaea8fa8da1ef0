package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// countingWriter counts the writes serve makes on its stdout: each is one
// write(2) on a pipe.
type countingWriter struct {
	w      io.Writer
	writes atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.w.Write(p)
}

// inProcessServe is the command's serve run in this process over pipes
// of its own, so that its allocations and writes can be counted.
type inProcessServe struct {
	in     *os.File
	out    *bufio.Reader
	stdout *countingWriter
	done   chan int
}

func startInProcessServe(b *testing.B) *inProcessServe {
	b.Helper()
	root := b.TempDir() // before TMPDIR moves
	tmp := benchTmpDir(b)
	inR, inW, err := os.Pipe()
	require.NoError(b, err)
	outR, outW, err := os.Pipe()
	require.NoError(b, err)
	s := &inProcessServe{in: inW, out: bufio.NewReaderSize(outR, 1<<20), stdout: &countingWriter{w: outW}, done: make(chan int, 1)}
	go func() {
		s.done <- run(context.Background(), []string{"serve", "--root", root}, inR, s.stdout, io.Discard)
		outW.Close()
	}()
	b.Cleanup(func() {
		_ = inW.Close()
		require.Equal(b, exitOK, <-s.done)
		_, _ = io.Copy(io.Discard, outR)
		inR.Close()
		outR.Close()
		left, _ := os.ReadDir(tmp)
		assert.Empty(b, left, "serve left staging behind")
	})
	return s
}

// benchTmpDir makes the benchmark's TMPDIR on a tmpfs when there is one,
// where the runtime stages by default; it is removed when the benchmark
// ends, whatever it holds.
func benchTmpDir(b *testing.B) string {
	b.Helper()
	parent := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		parent = "/dev/shm"
	}
	tmp, err := os.MkdirTemp(parent, "execute-code-bench-")
	require.NoError(b, err)
	b.Cleanup(func() { _ = os.RemoveAll(tmp) })
	b.Setenv("TMPDIR", tmp)
	return tmp
}

// roundTrip writes line and reads the next answer line, which must
// contain want; the read allocates nothing.
func (s *inProcessServe) roundTrip(b *testing.B, line []byte, want []byte) {
	_, err := s.in.Write(line)
	require.NoError(b, err)
	s.expect(b, want)
}

func (s *inProcessServe) expect(b *testing.B, want []byte) {
	got, err := s.out.ReadSlice('\n')
	require.NoError(b, err)
	if !bytes.Contains(got, want) {
		b.Fatalf("answer %q lacks %q", got, want)
	}
}

// BenchmarkServeLine measures serve's JSON-lines path in process: the
// time, allocations and stdout writes per line of a line the decoder
// alone answers (an unknown op), of the cell `x = 1` on a warm kernel,
// and of a burst of 64 lines sent in one write (writes/line below 1 is
// coalescing).
func BenchmarkServeLine(b *testing.B) {
	b.Run("decoder-answered", func(b *testing.B) {
		s := startInProcessServe(b)
		line := []byte(`{"id":1,"op":"nop","session":"s","script":"x = 1"}` + "\n")
		s.roundTrip(b, line, []byte(`unknown op`))
		b.ReportAllocs()
		w0 := s.stdout.writes.Load()
		for b.Loop() {
			s.roundTrip(b, line, []byte(`unknown op`))
		}
		b.ReportMetric(float64(s.stdout.writes.Load()-w0)/float64(b.N), "writes/line")
	})
	b.Run("cell", func(b *testing.B) {
		s := startInProcessServe(b)
		s.roundTrip(b, []byte(`{"id":"a","op":"attach","session":"s","agent":"main"}`+"\n"), []byte(`"ok"`))
		line := []byte(`{"id":2,"op":"execute","session":"s","script":"x = 1"}` + "\n")
		s.roundTrip(b, line, []byte(`"result"`))
		b.ReportAllocs()
		w0 := s.stdout.writes.Load()
		for b.Loop() {
			s.roundTrip(b, line, []byte(`"result"`))
		}
		b.ReportMetric(float64(s.stdout.writes.Load()-w0)/float64(b.N), "writes/line")
	})
	// The same cell at the Go API, on a runtime the command would build:
	// what serve adds is cell less api-cell.
	b.Run("api-cell", func(b *testing.B) {
		root := b.TempDir()
		tmp := benchTmpDir(b)
		rt, err := newRuntime(common{root: root, mode: "session"}, zerolog.Nop())
		require.NoError(b, err)
		owner, err := rt.Attach(context.Background(), executecode.Scope{SessionID: "s", AgentID: "main"})
		require.NoError(b, err)
		defer func() {
			require.NoError(b, owner.Detach(context.Background()))
			require.NoError(b, rt.Close(context.Background()))
			left, _ := os.ReadDir(tmp)
			assert.Empty(b, left, "the runtime left staging behind")
		}()
		cell := func() {
			res, err := rt.Execute(context.Background(), executecode.Call{Script: "x = 1", Owner: owner})
			require.NoError(b, err)
			require.True(b, res.Succeeded(), res.Text())
		}
		cell()
		b.ReportAllocs()
		for b.Loop() {
			cell()
		}
	})
	b.Run("burst", func(b *testing.B) {
		s := startInProcessServe(b)
		const lines = 64
		var burst []byte
		for i := range lines {
			burst = fmt.Appendf(burst, `{"id":%d,"op":"nop"}`+"\n", i)
		}
		b.ReportAllocs()
		w0 := s.stdout.writes.Load()
		for b.Loop() {
			_, err := s.in.Write(burst)
			require.NoError(b, err)
			for range lines {
				s.expect(b, []byte(`unknown op`))
			}
		}
		b.ReportMetric(float64(s.stdout.writes.Load()-w0)/float64(b.N*lines), "writes/line")
	})
	b.Run("cells-8-sessions", func(b *testing.B) {
		s := startInProcessServe(b)
		const sessions = 8
		for i := range sessions {
			s.roundTrip(b, fmt.Appendf(nil, `{"id":"a","op":"attach","session":"s%d","agent":"main"}`+"\n", i), []byte(`"ok"`))
		}
		var all []byte
		for i := range sessions {
			all = fmt.Appendf(all, `{"id":%d,"op":"execute","session":"s%d","script":"x = 1"}`+"\n", i, i)
		}
		var mu sync.Mutex
		round := func() {
			mu.Lock()
			defer mu.Unlock()
			_, err := s.in.Write(all)
			require.NoError(b, err)
			for range sessions {
				s.expect(b, []byte(`"result"`))
			}
		}
		round() // every kernel starts
		b.ReportAllocs()
		w0 := s.stdout.writes.Load()
		for b.Loop() {
			round()
		}
		b.ReportMetric(float64(s.stdout.writes.Load()-w0)/float64(b.N*sessions), "writes/line")
	})
}
