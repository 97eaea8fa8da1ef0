package proc

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func sanitizeAll(chunks ...string) string {
	var s sanitizer
	var out []byte
	for _, c := range chunks {
		out = s.append(out, []byte(c))
	}
	return string(s.flush(out))
}

var sanitizeCases = []struct {
	name, in, want string
}{
	{"plain text and tabs stay", "hello\tworld\n", "hello\tworld\n"},
	{"colour sequences go", "\x1b[31mred\x1b[0m plain", "red plain"},
	{"parameters with semicolons", "\x1b[1;32;40mX\x1b[m", "X"},
	{"erase line without parameters", "a\x1b[Kb", "ab"},
	{"lone ESC is a control byte", "a\x1bb", "ab"},
	{"OSC is not CSI: only the controls go", "\x1b]0;title\x07text", "]0;titletext"},
	{"private CSI is not in the rule", "\x1b[?25lx", "[?25lx"},
	{"CSI ending in a non-letter", "\x1b[12!x", "[12!x"},
	{"CRLF becomes LF", "a\r\nb\r\n", "a\nb\n"},
	{"lone CR goes", "50%\r100%\r", "50%100%"},
	{"CR CR LF", "a\r\r\nb", "a\nb"},
	{"C0 controls and DEL go", "\x00a\x01\x07\x08b\x7f\x1f", "ab"},
	{"valid multibyte stays", "héllo ✓ 😀 \uFFFD", "héllo ✓ 😀 \uFFFD"},
	{"invalid byte becomes U+FFFD", "a\xffb", "a\uFFFDb"},
	{"bad continuation", "a\xc3(b", "a\uFFFD(b"},
	{"truncated sequence at end of stream", "ok\xe2\x82", "ok\uFFFD\uFFFD"},
	{"surrogate encoding is invalid", "\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
	{"overlong encoding is invalid", "\xc0\xaf", "\uFFFD\uFFFD"},
	{"stray continuation bytes", "\x80\x81", "\uFFFD\uFFFD"},
	{"CSI of exactly 64 bytes goes", "\x1b[" + strings.Repeat("1", 61) + "m!", "!"},
	{"CSI longer than 64 bytes is text", "\x1b[" + strings.Repeat("1", 62) + "m!", "[" + strings.Repeat("1", 62) + "m!"},
	{"unfinished CSI at end of stream", "x\x1b[12", "x[12"},
	{"ESC at end of stream", "x\x1b", "x"},
	{"invalid byte inside CSI ends it", "\x1b[1\xffm", "[1\uFFFDm"},
	{"ESC ESC [ m", "\x1b\x1b[mz", "z"},
}

func TestSanitizerRules(t *testing.T) {
	for _, tc := range sanitizeCases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sanitizeAll(tc.in))
		})
	}
}

func TestSanitizerIgnoresChunkBoundaries(t *testing.T) {
	for _, tc := range sanitizeCases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			for i := 0; i <= len(in); i++ {
				assert.Equal(t, tc.want, sanitizeAll(in[:i], in[i:]), "split at %d", i)
				for j := i; j <= len(in); j++ {
					if got := sanitizeAll(in[:i], in[i:j], in[j:]); got != tc.want {
						t.Fatalf("split at %d and %d: got %q, want %q", i, j, got, tc.want)
					}
				}
			}
			// One byte at a time.
			chunks := make([]string, len(in))
			for i := 0; i < len(in); i++ {
				chunks[i] = in[i : i+1]
			}
			assert.Equal(t, tc.want, sanitizeAll(chunks...), "byte by byte")
		})
	}
}

// sanitizedInvariants holds for any input: valid UTF-8, no control byte
// other than tab and newline, no ESC.
func sanitizedInvariants(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("invalid UTF-8 in %q", out)
	}
	for i := 0; i < len(out); i++ {
		if b := out[i]; (b < 0x20 && b != '\t' && b != '\n') || b == 0x7f {
			t.Fatalf("control byte %#x at %d in %q", b, i, out)
		}
	}
}

func FuzzSanitize(f *testing.F) {
	for _, tc := range sanitizeCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		whole := sanitizeAll(string(in))
		sanitizedInvariants(t, whole)
		if len(in) > 0 {
			i := int(cut) % (len(in) + 1)
			if split := sanitizeAll(string(in[:i]), string(in[i:])); split != whole {
				t.Fatalf("split at %d: %q != %q", i, split, whole)
			}
		}
		if utf8.Valid(in) && !strings.ContainsFunc(string(in), func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f }) {
			if whole != string(in) {
				t.Fatalf("clean input changed: %q -> %q", in, whole)
			}
		}
	})
}
