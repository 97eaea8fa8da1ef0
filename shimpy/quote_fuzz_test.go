package shimpy

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRenderPreludeQuoting checks that any dir renders as one line whose
// literal decodes back to the same string, followed by the token read.
func FuzzRenderPreludeQuoting(f *testing.F) {
	f.Add("/tmp/rpc-0123456789")
	f.Add("a\"b\\c\nd<&>\u2028\u2029")
	f.Add("")
	f.Fuzz(func(t *testing.T, dir string) {
		if !utf8.ValidString(dir) {
			t.Skip("paths are UTF-8")
		}
		prelude := RenderPrelude(dir, 5, nil, 0, nil)
		i := strings.LastIndex(prelude, "\n\n_configure(")
		line := prelude[i+2:]
		if strings.Count(line, "\n") != 1 || strings.ContainsAny(line, "\u2028\u2029\r") {
			t.Fatalf("configure call spans lines: %q", line)
		}
		if gotDir := configureDir(t, prelude, 5); gotDir != dir {
			t.Fatalf("round trip: %q", gotDir)
		}
	})
}
