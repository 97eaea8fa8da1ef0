package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var binary string

// TestMain builds the real binary once: these tests are black-box, as a
// user of the command sees it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execute-code-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "execute-code")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(fmt.Sprintf("build: %v\n%s", err, out))
	}
	// VerifyTestMain exits the process itself: the binary's directory is
	// removed in its cleanup, which runs whatever the outcome.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

type cliResult struct {
	stdout, stderr string
	code           int
}

func cli(t *testing.T, stdin string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+t.TempDir()), env...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{out.String(), errb.String(), code}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestRunJSONPrintsTheToolResult(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "a.txt", "alpha\n")
	r := cli(t, "print('diag')\ntext(read('a.txt'))\ntext('two')\n", nil, "run", "--json", "--root", root, "-")
	require.Equal(t, 0, r.code, r.stderr)
	var res struct {
		Content []struct{ Type, Text string }
		Details map[string]any
		Trust   string
		Blocks  []string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "text", res.Content[0].Type)
	assert.Contains(t, res.Content[0].Text, "Diagnostics (stdout/stderr, not the result):\ndiag")
	assert.Equal(t, "trusted", res.Trust)
	require.Len(t, res.Blocks, 2)
	assert.Contains(t, res.Blocks[0], "alpha")
	assert.Equal(t, "two", res.Blocks[1])
	assert.Equal(t, 1.0, res.Details["rpc_calls"])
	assert.Equal(t, false, res.Details["persistent"])
}

func TestRunPrintsWhatTheModelSeesAndStreamsNotifications(t *testing.T) {
	script := writeFile(t, t.TempDir(), "s.py", "notify('one')\nnotify('two')\nprint('hello')\n")
	r := cli(t, "", nil, "run", script)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "hello\n\n", r.stdout)
	assert.Contains(t, r.stderr, "notify: one\nnotify: two\n")
}

func TestRunExitStatusSaysHowTheScriptEnded(t *testing.T) {
	assert.Equal(t, 0, cli(t, "text('ok')", nil, "run", "-").code)
	failed := cli(t, "raise ValueError('bad')", nil, "run", "-")
	assert.Equal(t, 1, failed.code)
	assert.Contains(t, failed.stdout, "ValueError: bad")
	timedOut := cli(t, "import time; time.sleep(30)", nil, "run", "--timeout-ms", "1000", "-")
	assert.Equal(t, 1, timedOut.code)
	assert.Contains(t, timedOut.stdout, "Script timed out after 1000ms.")
}

func TestRunUsageErrorsNameTheBadInputAndExit2(t *testing.T) {
	dir := t.TempDir()
	badTOML := writeFile(t, dir, "bad.toml", "[runtime.tools.execute_code]\ntimeout_ms = [1]\n")
	broken := writeFile(t, dir, "broken.toml", "[runtime.tools.execute_code\n")
	off := writeFile(t, dir, "off.toml", "[runtime.tools.execute_code]\nenabled = false\n")
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown flag", nil, []string{"run", "--bogus", "-"}, "bogus"},
		{"bad mode", nil, []string{"run", "--mode", "sessions", "-"}, "--mode"},
		{"bad timeout", nil, []string{"run", "--timeout-ms", "soon", "-"}, "--timeout-ms"},
		{"unknown tool", nil, []string{"run", "--tools", "read,bash", "-"}, `--tools: "bash" is not a tool`},
		{"unknown tool under serve", nil, []string{"serve", "--tools", "bash"}, `"bash"`},
		{"unknown tool under config", nil, []string{"config", "--tools", "read,,grep"}, `--tools: "" is not a tool`},
		{"bad approve", nil, []string{"run", "--approve", "maybe", "-"}, "--approve"},
		{"missing root", nil, []string{"run", "--root", filepath.Join(dir, "nope"), "-"}, "--root"},
		{"missing script file", nil, []string{"run", filepath.Join(dir, "nope.py")}, "nope.py"},
		{"wrong TOML type", nil, []string{"run", "--config", badTOML, "-"}, "timeout_ms"},
		{"unparseable TOML", nil, []string{"run", "--config", broken, "-"}, "broken.toml"},
		{"disabled explicitly", nil, []string{"run", "--config", off, "-"}, "execute_code is disabled"},
		{"python missing", []string{"LEMON_EXECUTE_CODE_PYTHON_PATH=/nonexistent/python3"}, []string{"run", "-"}, "python_path not found: /nonexistent/python3"},
		{"bad sandbox", nil, []string{"run", "--sandbox", "docker", "-"}, `--sandbox: "docker" is not none or landlock`},
		// A sandbox that cannot be applied fails closed, before any code.
		{"sandbox over a root holding the staging root", nil, []string{"run", "--sandbox", "landlock", "--root", "/", "-"}, "the tool root / contains"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "text('x')", tc.env, tc.args...)
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, tc.want)
			assert.Equal(t, 1, strings.Count(strings.TrimRight(r.stderr, "\n"), "\n")+1, "one line: %q", r.stderr)
		})
	}
	t.Run("empty script", func(t *testing.T) {
		r := cli(t, "", nil, "run", "-")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "Missing required parameter: script")
	})
}

// Every command answers -h and --help with its own flags on stdout and
// exits 0, with nothing run.
func TestEveryCommandPrintsItsFlagsForHelp(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"run":      {"-timeout-ms", "-approve", "-json", "-tools", "-root", "-mode", "-config"},
		"serve":    {"-metrics-addr", "-tools", "-root", "-mode", "-config"},
		"snapshot": {"-config"},
		"config":   {"-tools", "-root", "-mode", "-config"},
	} {
		for _, help := range []string{"--help", "-h"} {
			t.Run(cmd+" "+help, func(t *testing.T) {
				r := cli(t, "raise SystemExit('must not run')", nil, cmd, help)
				require.Equal(t, 0, r.code, r.stderr)
				assert.Empty(t, r.stderr)
				assert.Contains(t, r.stdout, "usage: execute-code "+cmd)
				for _, f := range flags {
					assert.Regexp(t, `(?m)^  `+f+`( |$)`, r.stdout, "%s lists %s", cmd, f)
				}
			})
		}
	}
}

func TestRunJSONErrorIsAnObjectOnStdout(t *testing.T) {
	r := cli(t, "text('x')", []string{"LEMON_EXECUTE_CODE_PYTHON_PATH=/nonexistent/python3"}, "run", "--json", "-")
	assert.Equal(t, 2, r.code)
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m), r.stdout)
	assert.Contains(t, m["error"], "/nonexistent/python3")
}

func TestConfigPrintsTheResolvedConfiguration(t *testing.T) {
	file := writeFile(t, t.TempDir(), "c.toml", "[runtime.tools.execute_code]\nmax_rpc_calls = 7\ntools = [\"read\", \"bash\"]\n")
	r := cli(t, "", []string{"LEMON_EXECUTE_CODE_TIMEOUT_MS=5000"}, "config", "--config", file, "--mode", "session")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "[runtime.tools.execute_code]")
	assert.Contains(t, r.stdout, "max_rpc_calls = 7")
	assert.Contains(t, r.stdout, "timeout_ms = 5000")
	assert.Contains(t, r.stdout, "kernel_mode = 'session'")
	assert.Contains(t, r.stdout, "tools = ['read']")
	assert.Contains(t, r.stderr, "bash", "the dropped tool name is warned about")
}

func TestRunSessionModeRunsOneCellOnAThrowawayKernel(t *testing.T) {
	r := cli(t, "x = 1\ntext(str(x))", nil, "run", "--mode", "session", "--json", "-")
	require.Equal(t, 0, r.code, r.stderr)
	var res struct {
		Details map[string]any
		Blocks  []string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, []string{"1"}, res.Blocks)
	assert.Equal(t, true, res.Details["persistent"])
	assert.Equal(t, true, res.Details["state_retained"])

	failed := cli(t, "raise KeyError('k')", nil, "run", "--mode", "session", "-")
	assert.Equal(t, 1, failed.code)
	assert.Contains(t, failed.stdout, "Script raised KeyError: 'k' (exit code 1)")
}

func TestSnapshotOfAFreshRuntimeShowsTheEffectiveConfiguration(t *testing.T) {
	file := writeFile(t, t.TempDir(), "c.toml", "max_live_kernels = 3\nkernel_idle_timeout_ms = 60000\n")
	r := cli(t, "", nil, "snapshot", "--config", file)
	require.Equal(t, 0, r.code, r.stderr)
	var snap struct {
		Capacity struct{ Live, Max, Available int }
		Reap     struct {
			IdleTimeoutMS int64 `json:"idle_timeout_ms"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &snap), r.stdout)
	assert.Equal(t, 0, snap.Capacity.Live)
	assert.Equal(t, 3, snap.Capacity.Max)
	assert.Equal(t, 3, snap.Capacity.Available)
	assert.Equal(t, int64(60000), snap.Reap.IdleTimeoutMS)
}

// A CLI started with SIGINT ignored keeps ignoring it; the script's own
// interpreter still gets the default handler (the launcher resets it).
func TestRunStartedWithSIGINTIgnoredIgnoresIt(t *testing.T) {
	script := writeFile(t, t.TempDir(), "s.py", "import signal, time\ntime.sleep(1)\ntext(str(signal.getsignal(signal.SIGINT) is signal.default_int_handler))\n")
	cmd := exec.Command("/bin/sh", "-c", `trap '' INT; exec "$0" run --json "$1"`, binary, script)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, cmd.Wait(), "the interrupt was ignored and the run ended normally")
	var res struct{ Blocks []string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, []string{"True"}, res.Blocks)
}

// The runtime's own variables, leaked into a user's environment, leave
// the CLI the CLI: the binary has no other role, and a stale handshake is
// replaced by the Spawner's own.
func TestLeakedRoleVariablesDoNotHijackTheCLI(t *testing.T) {
	r := cli(t, "text('still the cli')", []string{"EXECUTE_CODE_GUARD=1", "EXECUTE_CODE_LAUNCHER=1", "EXECUTE_CODE_HANDSHAKE=3:1"}, "run", "-")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "still the cli")
}
