package mcpsource

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/executecode/executecode/tools"
)

// A tools/list answer is a server's bytes: whatever schema and tool name
// it sends, the helper it becomes is a valid spec whose keyword
// arguments map one to one onto the server's names, or an error.
func FuzzSignatureOf(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "schema-*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add("tool", string(b))
	}
	f.Add("a-b.c", `{"type":"object","properties":{"from":{},"a-b":{},"a_b":{}},"required":["from"]}`)
	f.Fuzz(func(t *testing.T, tool, schema string) {
		var v any
		if json.Unmarshal([]byte(schema), &v) != nil {
			return
		}
		name := "srv_" + assign([]string{tool}, identifierPart, nil)[tool]
		sig, err := signatureOf(name, oneLine(tool, "fallback"), v)
		if err != nil {
			return
		}
		params, err := sig.spec.Params()
		if err != nil {
			t.Fatalf("spec does not validate: %v", err)
		}
		seen := map[string]bool{}
		call := map[string]any{}
		for _, p := range params {
			if !tools.UsableParam(p.Name) {
				t.Fatalf("unusable keyword %q", p.Name)
			}
			o, ok := sig.params[p.Name]
			if !ok || seen[o] {
				t.Fatalf("keyword %q maps to %q (known %v, repeated %v)", p.Name, o, ok, seen[o])
			}
			seen[o] = true
			call[p.Name] = p.Name
		}
		if _, err := sig.arguments(call); err != nil && !sig.whole {
			t.Fatalf("a call with every keyword: %v", err)
		}
	})
}
