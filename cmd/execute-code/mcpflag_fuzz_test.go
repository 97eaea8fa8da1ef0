package main

import (
	"testing"

	"github.com/executecode/executecode/tools"
)

// Whatever --mcp is given, it parses to a server with a usable name and a
// command, or to an error: never a panic, never an empty command.
func FuzzParseMCP(f *testing.F) {
	for _, s := range []string{"fs=mcp-server-filesystem '/a b' \"c\\\"d\" e\\ f {x,y}", "fs=cat $HOME", "x=a; b", "=", "a=", "a='"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s, err := parseMCP(v)
		if err != nil {
			return
		}
		if !tools.UsableParam(s.Name) || s.Command == "" {
			t.Fatalf("%q parsed to %+v", v, s)
		}
	})
}
