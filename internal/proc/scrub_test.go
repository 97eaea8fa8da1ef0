package proc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run's patterns as the facade builds them: nested directories, the
// staging root they live in, and a token.
const (
	tRoot  = "/dev/shm/execute-code-private-AbCdEfGhIj"
	tWS    = tRoot + "/exec-code-KlMnOpQrSt"
	tRPC   = tWS + "/rpc"
	tKern  = tRoot + "/python-kernel-UvWxYzAbCd"
	tToken = "c0ffee-TOKEN_abcdefghijklmnopqrstuvwxyz0123"
)

func runScrubber() *Scrubber {
	return NewScrubber(tRoot, "<private-root>", tToken, "<token>", tWS, "<workspace>",
		tRPC, "<workspace>/rpc", tKern, "<workspace>")
}

// naiveScrub is the specification: at each position the longest pattern
// that matches there is replaced, then the scan continues after it.
func naiveScrub(text string, pairs ...string) string {
	var b strings.Builder
	for i := 0; i < len(text); {
		best := -1
		for k := 0; k+1 < len(pairs); k += 2 {
			old := pairs[k]
			if old != "" && strings.HasPrefix(text[i:], old) && (best < 0 || len(old) > len(pairs[best])) {
				best = k
			}
		}
		if best < 0 {
			b.WriteByte(text[i])
			i++
			continue
		}
		b.WriteString(pairs[best+1])
		i += len(pairs[best])
	}
	return b.String()
}

func TestScrubberReplacesTheLongestPatternAtEachPosition(t *testing.T) {
	s := runScrubber()
	cases := []struct{ name, in, want string }{
		{"nothing to replace", "plain output\n", "plain output\n"},
		{"bridge dir beats its workspace", "ls " + tRPC + "/req-1.json", "ls <workspace>/rpc/req-1.json"},
		{"workspace file", tWS + "/script.py", "<workspace>/script.py"},
		{"kernel workspace file", `File "` + tKern + `/runner.py"`, `File "<workspace>/runner.py"`},
		{"staging root itself", "root " + tRoot + " and " + tRoot + "/other", "root <private-root> and <private-root>/other"},
		{"token", "token=" + tToken + ".", "token=<token>."},
		{"adjacent matches", tToken + tToken + tWS, "<token><token><workspace>"},
		{"a prefix of a pattern alone stays", tRoot[:10] + "|" + tToken[:5], tRoot[:10] + "|" + tToken[:5]},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, s.String(tc.in))
		})
	}
}

func TestNilAndEmptyScrubbersReplaceNothing(t *testing.T) {
	assert.Nil(t, NewScrubber())
	assert.Nil(t, NewScrubber("", "<x>"))
	var s *Scrubber
	assert.Equal(t, tWS, s.String(tWS))
}

func TestScrubberWithOverlappingPatternsMatchesTheSpecification(t *testing.T) {
	// The end of one pattern is the start of another: a stream that
	// waited for the second could miss the first.
	pairs := []string{"XYZ", "<a>", "ZW", "<b>", "XY", "<c>", "/a", "<d>", "/a/b/c", "<e>", "/", "<s>", "Q", "<q>"}
	s := NewScrubber(pairs...)
	for _, in := range []string{"XYZW", "XYW", "XYZZW", "/a/b/", "/a/b/c/a", "ZXYZW/a/b/cX", "//a/", "QQ/Qa"} {
		assert.Equal(t, naiveScrub(in, pairs...), s.String(in), in)
	}
}

// streamed scrubs chunks one by one, as a capture does, and checks the
// hold-back bound after every chunk, and that what it released never ends
// inside a character when the input so far did not either (the
// sanitizer's output never does).
func streamed(t testing.TB, s *Scrubber, chunks []string) string {
	st := scrubStream{s: s}
	var out []byte
	seen := ""
	for _, c := range chunks {
		seen += c
		out = st.append(out, []byte(c))
		if len(st.carry) > max(s.longest-1, 0) {
			t.Fatalf("held back %d bytes, longest pattern is %d", len(st.carry), s.longest)
		}
		if utf8.ValidString(seen) && !utf8.Valid(out) {
			t.Fatalf("released bytes end inside a character: %q", out)
		}
	}
	return string(st.flush(out))
}

func TestScrubStreamReplacesPatternsSplitAtEveryBoundary(t *testing.T) {
	s := runScrubber()
	whole := "a€ " + tRPC + "/x " + tToken + " ✓" + tKern + "/exec_tools.py " + tRoot + "\n"
	want := s.String(whole)
	require.NotContains(t, want, "lemon-")
	for i := 0; i <= len(whole); i++ {
		for j := i; j <= len(whole); j += 7 {
			got := streamed(t, s, []string{whole[:i], whole[i:j], whole[j:]})
			require.Equal(t, want, got, "split at %d and %d", i, j)
		}
	}
	assert.Equal(t, want, streamed(t, s, strings.Split(whole, "")), "byte by byte")
}

func FuzzScrubStream(f *testing.F) {
	f.Add("a/dev/shm/x/y b/dev", uint8(3), uint64(1))
	f.Add("XYZWXYXYZ", uint8(1), uint64(2))
	f.Add("é/a/b/c€/a", uint8(2), uint64(3))
	pairs := []string{"/dev/shm/x", "<r>", "/dev/shm/x/y", "<w>", "XYZ", "<a>", "ZW", "<b>", "XY", "<c>",
		"/a", "<d>", "/a/b/c", "<e>", "é/a", "<f>", "Q", "<q>"}
	s := NewScrubber(pairs...)
	f.Fuzz(func(t *testing.T, in string, step uint8, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 9))
		var chunks []string
		for rest := in; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(int(step)%16+1))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		st := scrubStream{s: s}
		var out []byte
		for _, c := range chunks {
			out = st.append(out, []byte(c))
			if len(st.carry) >= s.longest {
				t.Fatalf("held back %d bytes", len(st.carry))
			}
		}
		got := string(st.flush(out))
		if want := naiveScrub(in, pairs...); got != want {
			t.Fatalf("stream %q, whole %q (chunks %q)", got, want, chunks)
		}
		if s.String(in) != got {
			t.Fatalf("String differs from the stream for %q", in)
		}
	})
}

// The cut between the kept head and the rolling tail falls inside a
// path: the whole path is replaced before anything is cut, in the text
// and in the spill.
func TestCaptureScrubsBeforeItTruncatesOrSpills(t *testing.T) {
	const maxBytes = 1000 // head 400, tail 600
	s := runScrubber()
	for _, at := range []int{400 - 10, 400 - 1, 400} {
		t.Run(fmt.Sprintf("path at %d", at), func(t *testing.T) {
			in := strings.Repeat("h", at) + tWS + "/script.py\n" + strings.Repeat("m", 3000) +
				tToken + strings.Repeat("t", 590) + tRPC
			c := NewCapture(maxBytes, spillInto(t.TempDir(), new(int)), ScrubWith(s))
			// Reads of 7 bytes: every pattern crosses several of them.
			for rest := in; len(rest) > 0; {
				n := min(len(rest), 7)
				_, _ = c.Write([]byte(rest[:n]))
				rest = rest[n:]
			}
			got := c.Result()
			require.NoError(t, c.Close())
			require.True(t, got.Truncated)
			spilled, err := os.ReadFile(got.SpillPath)
			require.NoError(t, err)
			for what, text := range map[string]string{"text": got.Text, "spill": string(spilled)} {
				for _, secret := range []string{tRoot, tToken, "exec-code-", "c0ffee"} {
					assert.NotContains(t, text, secret, "%s", what)
				}
			}
			assert.Equal(t, s.String(in), string(spilled))
			assert.Equal(t, int64(len(spilled)), got.TotalBytes)
			assert.True(t, strings.HasSuffix(got.Text, "<workspace>/rpc"))
		})
	}
}

// A session kernel's stdout and stderr arrive as one stream in chunks of
// its pipe's reads: a path or a character split between two chunks is
// joined again.
func TestCaptureJoinsWhatTwoWritesSplit(t *testing.T) {
	c := NewCapture(1000, nil, ScrubWith(runScrubber()))
	for _, chunk := range []string{"out " + tWS[:20], tWS[20:] + "/script.py \xe2\x82", "\xac " + tToken[:9], tToken[9:] + "\n"} {
		_, _ = c.Write([]byte(chunk))
	}
	assert.Equal(t, "out <workspace>/script.py € <token>\n", c.Result().Text)
	require.NoError(t, c.Close())
}

func TestCaptureSpillStopsAtItsCapOnACharacterBoundary(t *testing.T) {
	const limit = 1001 // inside the second byte of a two-byte character
	in := strings.Repeat("a", 1000) + strings.Repeat("é", 2000)
	c := NewCapture(100, spillInto(t.TempDir(), new(int)), SpillLimit(limit))
	for rest := in; len(rest) > 0; {
		n := min(len(rest), 333)
		_, _ = c.Write([]byte(rest[:n]))
		rest = rest[n:]
	}
	got := c.Result()
	require.NoError(t, c.Close())
	require.True(t, got.Spilled)
	assert.True(t, got.SpillCut)
	spilled, err := os.ReadFile(got.SpillPath)
	require.NoError(t, err)
	assert.Equal(t, in[:1000], string(spilled), "cut back to a character boundary under the cap")
	assert.Equal(t, int64(1000), got.SpillBytes)
	assert.Equal(t, int64(len(in)), got.TotalBytes, "the total still counts everything")
	assert.True(t, strings.HasSuffix(got.Text, strings.Repeat("é", 30)), "the kept tail is unaffected")
}

func TestCaptureSpillUnderItsCapIsWhole(t *testing.T) {
	in := bytes.Repeat([]byte("line\n"), 100)
	c := NewCapture(10, spillInto(t.TempDir(), new(int)), SpillLimit(int64(len(in))))
	_, _ = c.Write(in)
	got := c.Result()
	require.NoError(t, c.Close())
	assert.False(t, got.SpillCut)
	assert.Equal(t, int64(len(in)), got.SpillBytes)
}

// BenchmarkScrubStream is the scrubber alone over 64 KiB writes: text
// with a few candidates, path-like lines that start like the staging root
// but are not it, and a flood of '/' (every byte a candidate), the worst
// a script can choose.
func BenchmarkScrubStream(b *testing.B) {
	sc := runScrubber()
	for _, in := range []struct {
		name string
		p    []byte
	}{
		{"plain", bytes.Repeat([]byte("output line of a chatty script\n"), (64<<10)/32)},
		{"near-misses", bytes.Repeat([]byte(tRoot[:len(tRoot)-1]+"\n"), (64<<10)/len(tRoot))},
		{"slashes", bytes.Repeat([]byte("/"), 64<<10)},
	} {
		b.Run(in.name, func(b *testing.B) {
			st := scrubStream{s: sc}
			var out []byte
			b.SetBytes(int64(len(in.p)))
			for b.Loop() {
				out = st.append(out[:0], in.p)
			}
		})
	}
}
