package shimpy

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRenderPreludeQuoting checks that any dir and token render as one
// line whose literals decode back to the same strings.
func FuzzRenderPreludeQuoting(f *testing.F) {
	f.Add("/tmp/rpc-0123456789", testToken)
	f.Add("a\"b\\c\nd", "<&>\u2028\u2029")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, dir, token string) {
		if !utf8.ValidString(dir) || !utf8.ValidString(token) {
			t.Skip("paths and tokens are UTF-8")
		}
		prelude := RenderPrelude(dir, token, nil, 0, nil)
		i := strings.LastIndex(prelude, "\n\n_configure(")
		line := prelude[i+2:]
		if strings.Count(line, "\n") != 1 || strings.ContainsAny(line, "\u2028\u2029\r") {
			t.Fatalf("configure call spans lines: %q", line)
		}
		gotDir, gotToken := configureLiterals(t, prelude)
		if gotDir != dir || gotToken != token {
			t.Fatalf("round trip: %q %q", gotDir, gotToken)
		}
	})
}
