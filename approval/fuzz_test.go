package approval

import (
	"errors"
	"testing"
)

// FuzzParseDecision: a host's decision string either parses to one of the
// five decisions or is refused with ErrInvalidDecision.
func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{"allow", "deny", "approve_global", "approve_once", "", "ask"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecision(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidDecision) || d != "" {
				t.Fatalf("ParseDecision(%q) = %q, %v", s, d, err)
			}
			return
		}
		if !d.valid() || (s != "allow" && string(d) != s) {
			t.Fatalf("ParseDecision(%q) = %q", s, d)
		}
	})
}
