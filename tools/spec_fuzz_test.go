package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzSpecParams: any schema either fails with ErrBadSpec or yields
// parameters that are each a distinct identifier, required ones first, so
// a rendered stub is always valid python.
func FuzzSpecParams(f *testing.F) {
	f.Add("weather", `{"type":"object","required":["city"],"properties":{"city":{},"units":{}}}`)
	f.Add("w", `{"type":"object","properties":{}}`)
	f.Add("w", `{"type":"object","required":["a","a"],"properties":{"a":{}}}`)
	f.Add("w", `{"type":"object","properties":{"a-b":{}}}`)
	f.Add("w", `{"type":"object","properties":{"a":{}},"required":"a"}`)
	f.Fuzz(func(t *testing.T, name, schema string) {
		s := Spec{Name: name, Description: "d", Parameters: json.RawMessage(schema)}
		ps, err := s.Params()
		if err != nil {
			if !strings.Contains(err.Error(), ErrBadSpec.Error()) {
				t.Fatalf("error does not wrap ErrBadSpec: %v", err)
			}
			return
		}
		if !identifier(name) || reserved[name] {
			t.Fatalf("accepted name %q", name)
		}
		seen := map[string]bool{}
		optional := false
		for _, p := range ps {
			if !UsableParam(p.Name) || seen[p.Name] {
				t.Fatalf("bad parameter %q in %v", p.Name, ps)
			}
			if p.Required && optional {
				t.Fatalf("required after optional in %v", ps)
			}
			optional = optional || !p.Required
			seen[p.Name] = true
		}
		if !strings.HasPrefix(s.Signature(), name+"(") {
			t.Fatalf("signature %q", s.Signature())
		}
	})
}
