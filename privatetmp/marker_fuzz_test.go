package privatetmp

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A marker is read from a directory another process left behind: its bytes
// are untrusted. Whatever they are, parsing must not panic, and anything
// accepted must be a real node name and a positive pid that formats back to
// the trimmed content.
func FuzzParseMarker(f *testing.F) {
	for _, seed := range []string{
		"node-a\n1234\n", "node\n0\n", "\n12\n", "a\n1\n2\n", "a\n12x\n",
		"a\n+12\n", "a\n99999999999999999999\n", "  host \n 7 \n", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := parseMarker(b)
		if !ok {
			return
		}
		if m.node == "" || m.pid <= 0 || strings.Contains(m.node, "\n") {
			t.Fatalf("accepted %q as node %q pid %d", b, m.node, m.pid)
		}
		again, ok := parseMarker(formatMarker(m.node, m.pid))
		if !ok || again != m {
			t.Fatalf("%q does not round-trip: %+v vs %+v", b, m, again)
		}
	})
}

func TestParseMarkerAcceptsWhatTheReferenceAccepts(t *testing.T) {
	cases := map[string]bool{
		"node-a\n1234\n":                   true,
		"node-a\n1234":                     true,
		"  node-a\n1234\n\n":               true,
		"node-a\n0042\n":                   true,
		"node-a\n0\n":                      false,
		"node-a\n-3\n":                     false,
		"node-a\n+3\n":                     false,
		"node-a\n12 \n3\n":                 false,
		"node-a\n12x\n":                    false,
		"\n12\n":                           false,
		"node-a\n":                         false,
		"a\nb\n12\n":                       false,
		"node-a\n" + "2147483648":          false,
		"node-a\n" + strconv.Itoa(1<<31-1): true,
	}
	for in, want := range cases {
		_, ok := parseMarker([]byte(in))
		assert.Equal(t, want, ok, "%q", in)
	}
}
