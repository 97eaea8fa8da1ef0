package main

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vendorNames are names of the systems this one was ported from; none may
// reach the model.
var vendorNames = regexp.MustCompile(`(?i)lemon|pi-python-repl`)

// Everything the model sees from a run names no vendor: results,
// headlines, tracebacks through the helpers' own file, tool errors, the
// spill path of a cut output, notifications, the untrusted wrapper, the
// shim's own messages and what a script can find out about its helpers.
// Only the LEMON_EXECUTE_CODE_* variables keep the old name.
func TestModelVisibleTextNamesNoVendor(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body><p>fetched page</p></body></html>"))
	}))
	defer page.Close()

	scripts := []struct {
		name, script string
		want         string // a regexp the result matches
		args         []string
	}{
		{"ok", "notify('step')\nprint('diag')\ntext(read('a.txt'))", "alpha", nil},
		{"exception", "raise ValueError('bad')", "ValueError: bad", nil},
		{"exception in a helper", "read(42)", "Traceback", nil},
		{"tool error raised", "read('missing.txt')", "ToolError", nil},
		{"tool error caught", "try:\n    read('../outside')\nexcept ToolError as e:\n    text(type(e).__module__ + ' ' + str(e))", "", nil},
		{"denied tool", "grep('a')", "deny list", []string{"--config", "deny.toml"}},
		{"narrowed tool", "grep('a')", "NameError", []string{"--tools", "read"}},
		{"timeout", "import time\ntime.sleep(30)", "timed out", []string{"--timeout-ms", "1000"}},
		{"spill", "print('x' * 200000)", "truncated", nil},
		{"input", "input()", `input\(\) is not supported|EOFError`, nil},
		{"stdin", "import sys\ntext(repr(sys.stdin.read()))", "", nil},
		{"untrusted", "text(webfetch('" + page.URL + "/'))", "fetched page", nil},
		{"introspection", "import sys, threading, os\nimport " + "exec_tools as m\ntext(m.__name__, m.__file__, m.__doc__ or '', repr(m.ToolError), ' '.join(t.name for t in threading.enumerate()), os.getcwd(), ' '.join(sys.path), ' '.join(sorted(sys.modules)))", "", nil},
		{"batch error", "batch([lambda: read('missing.txt'), lambda: read('a.txt')])", "", nil},
	}
	for _, mode := range []string{"per_call", "session"} {
		for _, s := range scripts {
			t.Run(mode+" "+s.name, func(t *testing.T) {
				root := t.TempDir()
				writeFile(t, root, "a.txt", "alpha\n")
				writeFile(t, root, "deny.toml", "[runtime.tools.execute_code]\ndeny = [\"grep\"]\n")
				args := []string{"run", "--json", "--mode", mode, "--root", root}
				for _, a := range s.args {
					if a == "deny.toml" {
						a = root + "/deny.toml"
					}
					args = append(args, a)
				}
				r := cli(t, s.script, nil, append(args, "-")...)
				require.NotEqual(t, exitUsage, r.code, r.stdout+r.stderr)
				assert.Regexp(t, s.want, r.stdout)
				assert.Empty(t, vendorNames.FindAllString(r.stdout, -1), "stdout: %s", r.stdout)
				assert.Empty(t, vendorNames.FindAllString(r.stderr, -1), "stderr: %s", r.stderr)
			})
		}
	}
}
