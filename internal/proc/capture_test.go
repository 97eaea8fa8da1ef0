package proc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spillInto opens spill files in dir and counts how often it was asked.
func spillInto(dir string, opened *int) func() (*os.File, error) {
	return func() (*os.File, error) {
		*opened++
		return os.CreateTemp(dir, "spill-*")
	}
}

func devNullSpill() (*os.File, error) { return os.OpenFile(os.DevNull, os.O_WRONLY, 0) }

func TestCaptureKeepsOutputThatFitsVerbatim(t *testing.T) {
	for _, size := range []int{0, 1, 99, 100} {
		opened := 0
		c := NewCapture(100, spillInto(t.TempDir(), &opened))
		in := strings.Repeat("a", size)
		_, err := c.Write([]byte(in))
		require.NoError(t, err)
		got := c.Result()
		require.NoError(t, c.Close())

		assert.Equal(t, Output{Text: in, TotalBytes: int64(size)}, got, "size %d", size)
		assert.Zero(t, opened, "no spill file while the output fits")
	}
}

func TestCaptureTruncatesToHeadMarkerAndTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		chunks []string
		want   string
	}{
		{
			name:   "one write",
			max:    10, // head 4, tail 6
			chunks: []string{"0123456789ABCDEF"},
			want:   "0123\n... [6 bytes truncated] ...\nABCDEF",
		},
		{
			name:   "byte by byte",
			max:    10,
			chunks: strings.Split("0123456789ABCDEF", ""),
			want:   "0123\n... [6 bytes truncated] ...\nABCDEF",
		},
		{
			name:   "overflow by one byte",
			max:    10,
			chunks: []string{"0123456789", "X"},
			want:   "0123\n... [1 bytes truncated] ...\n56789X",
		},
		{
			name:   "head is floor of 40 percent",
			max:    7, // head floor(2.8) = 2, tail 5
			chunks: []string{"abcdefghijkl"},
			want:   "ab\n... [5 bytes truncated] ...\nhijkl",
		},
		{
			name:   "head cut back to a rune boundary",
			max:    10, // head would end inside the euro sign
			chunks: []string{"ab€cdefghijklmnop"},
			want:   "ab\n... [11 bytes truncated] ...\nklmnop",
		},
		{
			name:   "tail drops its leading partial rune",
			max:    10,
			chunks: []string{"0123456789", "xyz€abcd"},
			want:   "0123\n... [12 bytes truncated] ...\nabcd",
		},
		{
			name:   "sanitized bytes are what counts",
			max:    10,
			chunks: []string{"\x1b[31m0123456789\x1b[0m", "\r\nAB"},
			want:   "0123\n... [3 bytes truncated] ...\n789\nAB",
		},
		{
			name:   "zero budget keeps only the marker",
			max:    0,
			chunks: []string{"abc"},
			want:   "\n... [3 bytes truncated] ...\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opened := 0
			c := NewCapture(tc.max, spillInto(t.TempDir(), &opened))
			for _, ch := range tc.chunks {
				_, _ = c.Write([]byte(ch))
			}
			got := c.Result()
			require.NoError(t, c.Close())

			whole := sanitizeAll(strings.Join(tc.chunks, ""))
			assert.Equal(t, tc.want, got.Text)
			assert.True(t, got.Truncated)
			assert.Equal(t, int64(len(whole)), got.TotalBytes)
			assert.Equal(t, 1, opened, "the spill file is opened once, at the first overflow")
			require.True(t, got.Spilled)
			spilled, err := os.ReadFile(got.SpillPath)
			require.NoError(t, err)
			assert.Equal(t, whole, string(spilled), "the spill holds everything from the start")
		})
	}
}

func TestCaptureStillTruncatesWhenSpillCannotOpen(t *testing.T) {
	for name, open := range map[string]func() (*os.File, error){
		"opener fails": func() (*os.File, error) { return nil, errors.New("no private root") },
		"no opener":    nil,
	} {
		t.Run(name, func(t *testing.T) {
			c := NewCapture(10, open)
			_, _ = c.Write([]byte("0123456789ABCDEF"))
			got := c.Result()
			require.NoError(t, c.Close())
			assert.Equal(t, Output{
				Text:       "0123\n... [6 bytes truncated] ...\nABCDEF",
				Truncated:  true,
				TotalBytes: 16,
			}, got)
		})
	}
}

func TestCaptureDropsSpillThatFailsMidway(t *testing.T) {
	dir := t.TempDir()
	var path string
	c := NewCapture(10, func() (*os.File, error) {
		f, err := os.CreateTemp(dir, "spill-*")
		if err == nil {
			path = f.Name()
			f.Close() // every later write fails
		}
		return f, err
	})
	_, _ = c.Write([]byte("0123456789ABCDEF"))
	got := c.Result()
	require.NoError(t, c.Close())

	assert.True(t, got.Truncated)
	assert.False(t, got.Spilled, "a partial spill is never advertised")
	assert.Empty(t, got.SpillPath)
	assert.NoFileExists(t, path)
}

// noisyStream is output as a misbehaving script makes it: text, colours,
// progress bars, multibyte runes and invalid bytes.
func noisyStream(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	pieces := []string{"line of text\n", "\x1b[32m", "\x1b[0m", "progress 10%\r", "€", "😀", "\xff", "\xe2\x82", "\t", "\x00", "é"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.Bytes()
}

func TestCaptureSpillHoldsEverythingWhateverTheChunking(t *testing.T) {
	in := noisyStream(1<<20, 7)
	whole := sanitizeAll(string(in))
	r := rand.New(rand.NewPCG(3, 4))

	c := NewCapture(4096, spillInto(t.TempDir(), new(int)))
	for rest := in; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(9000))
		_, _ = c.Write(rest[:n])
		rest = rest[n:]
	}
	got := c.Result()
	require.NoError(t, c.Close())

	spilled, err := os.ReadFile(got.SpillPath)
	require.NoError(t, err)
	assert.Equal(t, whole, string(spilled))
	assert.Equal(t, int64(len(whole)), got.TotalBytes)

	head, rest, ok := strings.Cut(got.Text, "\n... [")
	require.True(t, ok)
	_, tail, ok := strings.Cut(rest, " bytes truncated] ...\n")
	require.True(t, ok)
	assert.True(t, strings.HasPrefix(whole, head))
	assert.True(t, strings.HasSuffix(whole, tail))
	assert.LessOrEqual(t, len(head), 4096*40/100)
	assert.LessOrEqual(t, len(tail), 4096-4096*40/100)
	assert.Greater(t, len(head), 4096*40/100-utf8.UTFMax)
	assert.Greater(t, len(tail), 4096-4096*40/100-utf8.UTFMax)
	assert.Equal(t, truncationMarker(got.TotalBytes-int64(len(head))-int64(len(tail))),
		got.Text[len(head):len(got.Text)-len(tail)])
	assert.True(t, utf8.ValidString(got.Text))
}

func TestCaptureEndsTheStreamAtResult(t *testing.T) {
	c := NewCapture(100, nil)
	_, _ = c.Write([]byte("ok\xe2\x82"))
	first := c.Result()
	_, _ = c.Write([]byte("late"))
	assert.Equal(t, "ok\uFFFD\uFFFD", first.Text, "the unfinished rune is resolved at the end")
	assert.Equal(t, first, c.Result())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
}

func TestCaptureWriteAllocatesNothingOnceOverflowed(t *testing.T) {
	c := NewCapture(1<<20, devNullSpill)
	defer c.Close()
	chunk := noisyStream(64<<10, 1)[:64<<10]
	for range 40 { // well past the first overflow
		_, _ = c.Write(chunk)
	}
	allocs := testing.AllocsPerRun(200, func() { _, _ = c.Write(chunk) })
	assert.Zero(t, allocs)
}

func TestCaptureMemoryStaysBoundedFor200MB(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	const total = 200 << 20
	chunk := bytes.Repeat([]byte("output line of a chatty script\n"), 64<<10/32)
	c := NewCapture(1<<20, devNullSpill)
	defer c.Close()

	runtime.GC()
	var before, peak runtime.MemStats
	runtime.ReadMemStats(&before)
	writes := 0
	for written := 0; written < total; written += len(chunk) {
		_, _ = c.Write(chunk)
		if writes++; writes%256 == 0 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak.HeapInuse = max(peak.HeapInuse, m.HeapInuse)
		}
	}
	got := c.Result()
	assert.True(t, got.Truncated)
	assert.Equal(t, int64(writes*len(chunk)), got.TotalBytes)
	grown := int64(peak.HeapInuse) - int64(before.HeapInuse)
	assert.Less(t, grown, int64(8<<20), "heap grew by %d bytes for 200 MB written", grown)
}

func BenchmarkCapture200MB(b *testing.B) {
	const total = 200 << 20
	chunk := noisyStream(64<<10, 9)[:64<<10]
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		c := NewCapture(1<<20, devNullSpill)
		for written := 0; written < total; written += len(chunk) {
			_, _ = c.Write(chunk)
		}
		_ = c.Result()
		_ = c.Close()
	}
}

// BenchmarkCaptureScrub200MB measures what a run's scrubber costs the
// capture: the same noisy output as BenchmarkCapture200MB, and path-heavy
// output (grep hits, every '/' a candidate, a workspace path and the token
// every 512 lines), each without and with the scrubber in the same run.
func BenchmarkCaptureScrub200MB(b *testing.B) {
	var paths bytes.Buffer
	for i := 0; paths.Len() < 64<<10; i++ {
		if i%512 == 0 {
			paths.WriteString(tWS + "/script.py:3: " + tToken + "\n")
			continue
		}
		fmt.Fprintf(&paths, "/home/user/project/src/pkg/file_%d.go:%d: matched text\n", i, i%300)
	}
	for _, in := range []struct {
		name  string
		chunk []byte
	}{{"noisy", noisyStream(64<<10, 9)[:64<<10]}, {"paths", paths.Bytes()[:64<<10]}} {
		for _, sc := range []struct {
			name string
			s    *Scrubber
		}{{"none", nil}, {"run", runScrubber()}} {
			b.Run(in.name+"/"+sc.name, func(b *testing.B) {
				const total = 200 << 20
				b.SetBytes(total)
				b.ReportAllocs()
				for b.Loop() {
					c := NewCapture(1<<20, devNullSpill, ScrubWith(sc.s))
					for written := 0; written < total; written += len(in.chunk) {
						_, _ = c.Write(in.chunk)
					}
					_ = c.Result()
					_ = c.Close()
				}
			})
		}
	}
}

func FuzzCapture(f *testing.F) {
	f.Add([]byte("0123456789ABCDEF"), uint16(10), uint16(3))
	f.Add([]byte("ab€cdefghijklmnop\x1b[31m\r\n\xff"), uint16(10), uint16(1))
	f.Add([]byte("short"), uint16(100), uint16(2))
	f.Add([]byte("xx/ws/a/rpc/yyTOKENzz"), uint16(12), uint16(2))
	// Short patterns, so that fuzzed input hits them, split and cut.
	sc := NewScrubber("/ws/a", "<workspace>", "/ws/a/rpc", "<workspace>/rpc", "TOKEN", "<token>", "€x", "<e>")
	f.Fuzz(func(t *testing.T, in []byte, maxBytes, chunk uint16) {
		dir := t.TempDir()
		c := NewCapture(int(maxBytes), func() (*os.File, error) { return os.CreateTemp(dir, "s-*") }, ScrubWith(sc))
		step := int(chunk)%64 + 1
		for rest := in; len(rest) > 0; {
			n := min(step, len(rest))
			_, _ = c.Write(rest[:n])
			rest = rest[n:]
		}
		got := c.Result()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		whole := sc.String(sanitizeAll(string(in)))
		if got.TotalBytes != int64(len(whole)) {
			t.Fatalf("total %d, want %d", got.TotalBytes, len(whole))
		}
		if !utf8.ValidString(got.Text) {
			t.Fatalf("invalid UTF-8 in %q", got.Text)
		}
		if !got.Truncated {
			if got.Text != whole || got.Spilled {
				t.Fatalf("fitting output changed: %q vs %q", got.Text, whole)
			}
			return
		}
		spilled, err := os.ReadFile(filepath.Clean(got.SpillPath))
		if err != nil || string(spilled) != whole {
			t.Fatalf("spill %q (%v), want %q", spilled, err, whole)
		}
		head, rest, _ := strings.Cut(got.Text, "\n... [")
		i := strings.LastIndex(rest, " bytes truncated] ...\n")
		tail := rest[i+len(" bytes truncated] ...\n"):]
		if !strings.HasPrefix(whole, head) || !strings.HasSuffix(whole, tail) ||
			len(head)+len(tail) >= len(whole) || len(head)+len(tail) > int(maxBytes) {
			t.Fatalf("bad truncation of %q at %d: %q", whole, maxBytes, got.Text)
		}
		if got.Text[len(head):len(got.Text)-len(tail)] != truncationMarker(int64(len(whole)-len(head)-len(tail))) {
			t.Fatalf("bad marker in %q", got.Text)
		}
	})
}
