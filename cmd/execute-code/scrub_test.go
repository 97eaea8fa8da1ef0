package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretsScript is the integration tests' script that says every host
// secret it can reach through every channel, and writes them to
// secrets.json in its cwd; it expects max_output_bytes = 4000.
func secretsScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "integration", "testdata", "secrets.py"))
	require.NoError(t, err)
	return string(b)
}

const smallOutput = "LEMON_EXECUTE_CODE_MAX_OUTPUT_BYTES=4000"

// cliResultJSON is what run --json and serve's result carry.
type cliResultJSON struct {
	Content []struct{ Text string }
	Details struct {
		Truncated      bool   `json:"truncated"`
		FullOutputPath string `json:"full_output_path"`
	}
	Blocks []string
}

// assertModelSeesNoSecret checks everything the model is shown of one
// call (the printed result, the notify lines, the spill's contents, with
// the spill's own path cut out) for the secrets the script found in root,
// and for any fragment of a staging path.
func assertModelSeesNoSecret(t *testing.T, root, shown string, res cliResultJSON) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "secrets.json"))
	require.NoError(t, err)
	var secrets []string
	require.NoError(t, json.Unmarshal(b, &secrets))
	require.NotEmpty(t, secrets)
	require.True(t, res.Details.Truncated)
	require.NotEmpty(t, res.Details.FullOutputPath)
	spill, err := os.ReadFile(res.Details.FullOutputPath)
	require.NoError(t, err)
	seen := strings.ReplaceAll(shown+"\n"+string(spill), res.Details.FullOutputPath, "<spill>")
	for _, s := range secrets {
		assert.NotContains(t, seen, s)
	}
	for _, fragment := range []string{"execute-code-private", "exec-code", "python-kernel", "/rpc-"} {
		assert.NotContains(t, seen, fragment)
	}
	assert.Contains(t, seen, "<workspace>/exec_tools.py")
	assert.Contains(t, seen, "<token>")
	assert.Contains(t, seen, "notify <private-root>")
	assert.False(t, regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f]").MatchString(res.Content[0].Text), "control bytes in the result")
}

func TestRunShowsNoHostPathOrTokenInEitherMode(t *testing.T) {
	script := secretsScript(t)
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			r := cli(t, script, []string{smallOutput}, "run", "--json", "--mode", mode, "--root", root, "-")
			require.Equal(t, 1, r.code, r.stderr) // the script ends in an exception
			var res cliResultJSON
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			assertModelSeesNoSecret(t, root, r.stdout+"\n"+r.stderr, res)
			assert.Contains(t, r.stderr, "notify: notify <workspace>/rpc\n")
		})
	}
}

func TestServeShowsNoHostPathOrToken(t *testing.T) {
	root := t.TempDir()
	p := startServeIn(t, t.TempDir(), []string{smallOutput}, "--root", root)
	p.send(`{"id":1,"op":"attach","session":"s1","agent":"main"}`)
	require.Equal(t, true, p.answer()["ok"])
	p.send(mustJSON(t, map[string]any{"id": 2, "op": "execute", "session": "s1", "script": secretsScript(t), "timeout_ms": 60000}))
	var shown strings.Builder
	var result map[string]any
	for result == nil {
		select {
		case m, ok := <-p.lines:
			require.True(t, ok, "serve closed its output")
			line, err := json.Marshal(m)
			require.NoError(t, err)
			shown.Write(line)
			shown.WriteByte('\n')
			if r, ok := m["result"].(map[string]any); ok {
				result = r
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no result from serve")
		}
	}
	raw, err := json.Marshal(result)
	require.NoError(t, err)
	var res cliResultJSON
	require.NoError(t, json.Unmarshal(raw, &res))
	// JSON escapes < and >; the model reads them decoded.
	seen := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(shown.String())
	assertModelSeesNoSecret(t, root, seen, res)
	assert.Contains(t, res.Content[0].Text, "Script raised ToolError: <workspace>/rpc; ")
	p.send(`{"id":3,"op":"detach","session":"s1"}`)
	assert.Equal(t, true, p.answer()["ok"])
}

// A print loop far past a strict fsize_limit_mb = 10 leaves a spill of
// exactly the cap, and the result says the spill was cut.
func TestRunFloodUnderAStrictFileSizeLimitLeavesACappedSpill(t *testing.T) {
	const mib = 1 << 20
	script := "line = 'z' * 1023\nfor _ in range(24 * 1024):\n    print(line)\ntext('done')\n"
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			r := cli(t, script, []string{"LEMON_EXECUTE_CODE_FSIZE_LIMIT_MB=10"}, "run", "--json", "--mode", mode, "--timeout-ms", "120000", "-")
			require.Equal(t, 0, r.code, r.stderr)
			var res cliResultJSON
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			path := res.Details.FullOutputPath
			require.NotEmpty(t, path)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, int64(10*mib), fi.Size())
			assert.Contains(t, res.Content[0].Text,
				fmt.Sprintf("[Output saved to: %s (first %d of %d bytes; the rest was cut)]", "<spill>/"+filepath.Base(path), 10*mib, 24*mib))
			assert.Equal(t, []string{"done"}, res.Blocks)
		})
	}
}

// A host that itself runs under a file size limit (Go ignores SIGXFSZ, so
// a write past it fails with EFBIG) keeps the spill up to that limit and
// says it was cut, rather than dropping it or dying.
func TestHostUnderItsOwnFileSizeLimitCutsTheSpill(t *testing.T) {
	const limit = 2 << 20 // ulimit -f counts 512-byte blocks in a POSIX shell
	script := "line = 'q' * 1023\nfor _ in range(6 * 1024):\n    print(line)\ntext('done')\n"
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf(`ulimit -S -f %d && exec "$0" "$@"`, limit/512),
				binary, "run", "--json", "--mode", mode, "-")
			cmd.Stdin = strings.NewReader(script)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(),
				"LEMON_EXECUTE_CODE_FSIZE_LIMIT_MB=0", "LEMON_EXECUTE_CODE_MAX_SPILL_BYTES=0")
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			require.NoError(t, err, string(out))
			var res cliResultJSON
			require.NoError(t, json.Unmarshal(out, &res), string(out))
			path := res.Details.FullOutputPath
			require.NotEmpty(t, path, "the spill is kept up to the limit")
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, int64(limit), fi.Size())
			assert.Contains(t, res.Content[0].Text, fmt.Sprintf("[Output saved to: %s (first %d of %d bytes; the rest was cut)]", "<spill>/"+filepath.Base(path), limit, 6<<20))
			assert.Equal(t, []string{"done"}, res.Blocks)
		})
	}
}

// Without --json the model's text names the spill by placeholder, and the
// host path goes to stderr for the person at the terminal.
func TestRunPrintsTheSpillsHostPathOnStderr(t *testing.T) {
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			r := cli(t, "for i in range(20000):\n    print('row', i)\n", nil, "run", "--mode", mode, "-")
			require.Equal(t, 0, r.code, r.stderr)
			m := regexp.MustCompile(`\[Full output saved to: <spill>/(spill-[A-Za-z0-9]+)\]`).FindStringSubmatch(r.stdout)
			require.NotNil(t, m, r.stdout)
			p := strings.TrimSpace(strings.TrimPrefix(r.stderr, "execute-code: full output saved to "))
			assert.Equal(t, m[1], filepath.Base(p), r.stderr)
			assert.NotContains(t, r.stdout, p)
			assert.FileExists(t, p)
		})
	}
}
