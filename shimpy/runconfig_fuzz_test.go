package shimpy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzRunConfig checks that a run's configuration is either refused by
// the host or encoded as exactly the four NUL-ended fields the shim
// splits it into, within the shim's bound: no token, directory or bell
// can add, remove or move a field.
func FuzzRunConfig(f *testing.F) {
	f.Add("tok_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn0", "/dev/shm/execute-code-private-x/exec-code-y/rpc-z", 3, 4, true)
	f.Add("t", "/d\x00e", 3, 3, true)
	f.Add("a b", "relative", 0, 0, false)
	f.Add("", "/", 7, 8, true)
	f.Fuzz(func(t *testing.T, token, dir string, req, resp int, withBells bool) {
		cfg := RunConfig{Token: token, Dir: dir}
		if withBells {
			cfg.Bells = &Bells{Request: req, Response: resp}
		}
		b, err := cfg.encode()
		valid := token != "" && len(token) <= maxRunToken && strings.IndexFunc(token, func(r rune) bool { return !isTokenChar(r) }) < 0 &&
			strings.HasPrefix(dir, "/") && len(dir) <= maxRunDir && !strings.Contains(dir, "\x00") &&
			(!withBells || isBellFD(req) && isBellFD(resp) && req != resp)
		if !valid {
			if err == nil || !errors.Is(err, ErrRunConfig) {
				t.Fatalf("%+v accepted (%v)", cfg, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%+v refused: %v", cfg, err)
		}
		bells := ""
		if withBells {
			bells = fmt.Sprintf("%d,%d", req, resp)
		}
		want := [][]byte{[]byte(runMagic), []byte(token), []byte(dir), []byte(bells), {}}
		got := bytes.Split(b, []byte{0})
		if len(b) > maxRunConfig || len(got) != len(want) {
			t.Fatalf("%q: %d fields, %d bytes", b, len(got), len(b))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("field %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}
