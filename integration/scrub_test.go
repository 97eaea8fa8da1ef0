package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// secretsScript says every host secret it can reach (the token, the
// workspace and bridge paths, the helpers' and the runner's files, the
// staging root, each also symlink-resolved) through text(), notify(),
// stdout, stderr, a spilled flood and an exception, and writes the list to
// secrets.json in its cwd. Its head cut expects max_output_bytes = 4000.
func secretsScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "secrets.py"))
	require.NoError(t, err)
	return string(b)
}

// readSecrets is what secretsScript found.
func readSecrets(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "secrets.json"))
	require.NoError(t, err)
	var secrets []string
	require.NoError(t, json.Unmarshal(b, &secrets))
	require.NotEmpty(t, secrets)
	return secrets
}

// modelSees is everything a model is shown of one call: the result (text,
// blocks, details), the notify() messages and the spill's contents. The
// spill's own path is shown on purpose, so it is cut out.
func modelSees(t *testing.T, res executecode.Result, notes []string) string {
	t.Helper()
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	seen := string(raw) + "\n" + strings.Join(notes, "\n")
	if p := res.Details.FullOutputPath; p != "" {
		spill, err := os.ReadFile(p)
		require.NoError(t, err)
		seen += "\n" + string(spill)
		seen = strings.ReplaceAll(seen, p, "<spill>")
	}
	return seen
}

// assertNoSecret checks seen for every secret, and for any fragment of a
// staging path (a path cut in two would leave one).
func assertNoSecret(t *testing.T, seen string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		assert.NotContains(t, seen, s)
	}
	for _, fragment := range []string{"execute-code-private", "exec-code", "python-kernel", "/rpc-"} {
		assert.NotContains(t, seen, fragment)
	}
}

var controlBytes = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f]")

func TestNoHostPathOrTokenReachesTheModelInEitherMode(t *testing.T) {
	script := secretsScript(t)
	for _, mode := range []string{"per call", "session"} {
		t.Run(mode, func(t *testing.T) {
			// The staging TMPDIR is reached through a symlink, so every
			// path also has a resolved form (what os.getcwd and
			// os.path.realpath print).
			link := filepath.Join(t.TempDir(), "tmp-link")
			real := t.TempDir()
			require.NoError(t, os.Symlink(real, link))
			opts := []envOption{
				withConfig(func(c *config.Config) { c.MaxOutputBytes = 4000 }),
				withRuntimeOption(executecode.WithTmpDir(link)),
			}
			var e *env
			var res executecode.Result
			if mode == "session" {
				e = sessionEnv(t, nil, opts...)
				res = e.cell(e.attach("s1"), script)
			} else {
				e = newEnv(t, nil, opts...)
				res = e.run(script)
			}
			secrets := readSecrets(t, e.root)
			joined := strings.Join(secrets, " ")
			require.Contains(t, joined, link, "the symlinked form was said")
			require.Contains(t, joined, real, "the resolved form was said")

			d := res.Details
			require.True(t, d.Truncated)
			require.NotEmpty(t, d.FullOutputPath)
			assertNoSecret(t, modelSees(t, res, e.notify), secrets)

			text := res.Text()
			for _, name := range []string{"<workspace>/exec_tools.py", "<workspace>/rpc", "<token>", "<private-root>"} {
				assert.Contains(t, text, name)
			}
			if mode == "session" {
				assert.NotContains(t, text, "runner.py", "a cell's sys.argv names no runner")
				assert.True(t, strings.HasPrefix(text, "Script raised ToolError: <workspace>/rpc; "), text[:200])
			} else {
				assert.Contains(t, text, "<workspace>/script.py")
			}
			assert.Contains(t, text, `File "<workspace>/exec_tools.py", line`, "the traceback names the helpers' file")
			assert.Contains(t, text, "> red bell", "the exception's control bytes and escapes are gone")
			assert.False(t, controlBytes.MatchString(text), "control bytes in %q", controlBytes.FindString(text))
			assert.Contains(t, res.Blocks, "text <workspace>/exec_tools.py")

			// The head was cut inside a path: what is kept is part of its
			// canonical name, never part of the path.
			head, _, ok := strings.Cut(text, "\n... [")
			require.True(t, ok)
			assert.True(t, strings.HasSuffix(head, "h<worksp"), "head ends %q; spill starts %q", head[max(len(head)-40, 0):], spillStart(d.FullOutputPath))

			spill, err := os.ReadFile(d.FullOutputPath)
			require.NoError(t, err)
			if mode == "per call" {
				assert.Contains(t, string(spill), "reads <workspace>/rpc\n", "a path split across two reads")
				assert.Contains(t, string(spill), "streams <private-root>\n", "a path split across stdout and stderr")
			}
			// (A kernel's stderr may come between the two reads of the
			// split path; the checks above found no fragment of it.)

			require.NotEmpty(t, e.notify)
			last := e.notify[len(e.notify)-1]
			assert.Equal(t, strings.Repeat("n", 4086)+"<token>", last, "scrubbed before its 4 KiB cap")
		})
	}
}

// The spill file stops at its cap (the smaller of max_spill_bytes and
// fsize_limit_mb), and the marker says it was cut.
func TestSpillFileIsCappedAndTheMarkerSaysSo(t *testing.T) {
	const mib = 1 << 20
	script := "import sys\nline = 'y' * 1023 + '\\n'\nfor _ in range(3 * 1024):\n    sys.stdout.write(line)\ntext('done')\n"
	for _, mode := range []string{"per call", "session"} {
		t.Run(mode, func(t *testing.T) {
			opt := withConfig(func(c *config.Config) { c.FsizeLimitMB = 1 })
			var res executecode.Result
			if mode == "session" {
				e := sessionEnv(t, nil, opt)
				res = e.cell(e.attach("s1"), script)
			} else {
				res = newEnv(t, nil, opt).run(script)
			}
			d := res.Details
			require.True(t, d.Truncated)
			require.NotEmpty(t, d.FullOutputPath)
			fi, err := os.Stat(d.FullOutputPath)
			require.NoError(t, err)
			assert.Equal(t, int64(mib), fi.Size(), "the spill holds exactly its cap of plain ASCII")
			assert.Contains(t, res.Text(), fmt.Sprintf("[Output saved to: %s (first %d of %d bytes; the rest was cut)]",
				"<spill>/"+filepath.Base(d.FullOutputPath), mib, 3*mib))
			assert.NotContains(t, res.Text(), "[Full output saved to:")
			assert.Equal(t, []string{"done"}, res.Blocks)
		})
	}
}

// spillStart is how a spill starts and what surrounds its first
// canonical name, for a failure message.
func spillStart(path string) string {
	b, _ := os.ReadFile(path)
	i := max(strings.IndexByte(string(b), '<'), 0)
	return string(b[:min(len(b), 100)]) + " ... " + string(b[max(i-40, 0):min(len(b), i+200)])
}
