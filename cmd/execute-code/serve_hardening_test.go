package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// markEnv tags every process a test's host starts, so survivors can be
// found by their environment whatever became of their parent.
const markEnv = "EXECUTE_CODE_TEST_MARK"

func newMark() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// host is an `execute-code serve` whose environment and TMPDIR the test
// chooses, so it can be killed and its leftovers inspected.
type host struct {
	*serveProc
	tmp string
}

func startHost(t *testing.T, tmp string, env []string, args ...string) *host {
	t.Helper()
	return &host{serveProc: startServeIn(t, tmp, env, args...), tmp: tmp}
}

// next returns the next line, notifications included.
func (p *serveProc) next() map[string]any {
	p.t.Helper()
	select {
	case m, ok := <-p.lines:
		require.True(p.t, ok, "serve closed its output")
		return m
	case <-time.After(60 * time.Second):
		p.t.Fatal("no line from serve")
	}
	return nil
}

// busyScript starts two grandchildren that sleep, one in python's group
// and one that moved to a group of its own, then reports the
// interpreter's and the grandchildren's pids with notify and stays busy.
const busyScript = `import os, subprocess, sys, time
sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
a = subprocess.Popen(sleeper)
b = subprocess.Popen(sleeper, process_group=0)
notify("pids %d %d %d" % (os.getpid(), a.pid, b.pid))
time.sleep(120)
`

// A host killed with SIGKILL while a per-call run and a kernel are busy
// leaves nothing behind within 2 s: the parent-death signal takes the
// interpreters, and the host's guard process, which outlives it by design,
// kills their children (in python's group or in one of their own) and then
// exits itself.
func TestHostKilledWithSIGKILLLeavesNothingRunning(t *testing.T) {
	mark, tmp := newMark(), t.TempDir()
	t.Cleanup(func() {
		for _, pid := range proctest.Marked(markEnv, mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	h := startHost(t, tmp, []string{markEnv + "=" + mark})
	h.send(`{"id":1,"op":"attach","session":"s1","agent":"main"}`)
	require.Equal(t, true, h.answer()["ok"])
	script, _ := json.Marshal(busyScript)
	h.send(fmt.Sprintf(`{"id":2,"op":"execute","session":"s1","script":%s,"timeout_ms":60000}`, script))
	h.send(fmt.Sprintf(`{"id":3,"op":"execute","script":%s,"timeout_ms":60000}`, script))
	var started []int
	for len(started) < 6 {
		m := h.next()
		note, ok := m["notify"].(string)
		require.True(t, ok, "expected the scripts' notifications, got %v", m)
		var py, a, b int
		_, err := fmt.Sscanf(note, "pids %d %d %d", &py, &a, &b)
		require.NoError(t, err)
		started = append(started, py, a, b)
	}
	require.Len(t, proctest.WaitGone(started, 0), 6, "both interpreters and their children run")
	before := proctest.Marked(markEnv, mark)
	require.Greater(t, len(before), 6, "the host's guard runs beside them")

	require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	left := proctest.WaitGone(before, 2*time.Second)
	assert.Empty(t, left, "interpreters, their children and the guard must be gone within 2 s of the host's SIGKILL")
	t.Logf("%d processes gone %s after the host's SIGKILL", len(before), time.Since(killed).Round(time.Millisecond))

	// The guard removed the dead host's staging root once its processes
	// were dead; the next host on the same TMPDIR works.
	stale, _ := filepath.Glob(filepath.Join(tmp, "execute-code-private-*"))
	assert.Empty(t, stale, "the dead host's staging root is removed by its guard")
	next := startHost(t, tmp, nil)
	next.send(`{"id":1,"op":"execute","script":"text('after')"}`)
	assert.Equal(t, []any{"after"}, blocks(t, next.answer()))
}

// Every kind of bad input gets one clear error line, and while a cell of
// another session is still running the server answers each at once and
// keeps serving a second session: every answer below arrives before the
// first session's cell is let go.
func TestServeAnswersBadInputWhileOtherSessionsKeepServing(t *testing.T) {
	h := startHost(t, t.TempDir(), nil)
	gate := filepath.Join(t.TempDir(), "gate")
	h.send(`{"id":"a1","op":"attach","session":"A","agent":"main"}`)
	require.Equal(t, true, h.answer()["ok"])
	held, _ := json.Marshal(fmt.Sprintf("import os, time\nnotify('holding')\nwhile not os.path.exists(%q):\n    time.sleep(0.01)\ntext('released')", gate))
	h.send(fmt.Sprintf(`{"id":"a2","op":"execute","session":"A","script":%s,"timeout_ms":120000}`, held))
	require.Equal(t, "holding", h.next()["notify"])

	junk := bytes.Repeat([]byte("x"), 10<<20)
	cases := []struct {
		name, line string
		id         any
		want       string
	}{
		{"malformed JSON", `{not json`, nil, "not a JSON object"},
		{"trailing garbage", `{"id":1,"op":"snapshot"} tail`, nil, "not a JSON object"},
		{"array", `[1,2]`, nil, "not a JSON object"},
		{"bare number", `42`, nil, "not a JSON object"},
		{"null", `null`, nil, `"op"`},
		{"deep nesting", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), nil, "not a JSON object"},
		{"10 MB of junk", string(junk), nil, "not a JSON object"},
		{"10 MB unknown op", fmt.Sprintf(`{"id":9,"op":"%s"}`, junk), 9.0, "unknown op"},
		{"over the line cap", fmt.Sprintf(`{"id":10,"op":"snapshot","pad":"%s"}`, bytes.Repeat([]byte("y"), 17<<20)), nil, "longer than"},
		{"invalid UTF-8", "{\"id\":11,\"op\":\"attach\",\"session\":\"\xff\xfe\",\"agent\":\"a\"}", nil, "UTF-8"},
		{"NUL byte", "{\"id\":12,\"op\":\"snap\x00shot\"}", nil, "not a JSON object"},
		{"missing op", `{"id":13}`, 13.0, `"op"`},
		{"op of wrong type", `{"id":14,"op":5}`, 14.0, `"op"`},
		{"unknown op", `{"id":15,"op":"dance"}`, 15.0, `unknown op "dance"`},
		{"session of wrong type", `{"id":16,"op":"attach","session":5,"agent":"a"}`, 16.0, `"session" has the wrong type`},
		{"agent of wrong type", `{"id":17,"op":"attach","session":"s","agent":true}`, 17.0, `"agent" has the wrong type`},
		{"missing agent", `{"id":18,"op":"attach","session":"s"}`, 18.0, `missing field "agent"`},
		{"script of wrong type", `{"id":19,"op":"execute","session":"B","script":7}`, 19.0, `"script" has the wrong type`},
		{"timeout of wrong type", `{"id":20,"op":"execute","session":"B","script":"x=1","timeout_ms":"soon"}`, 20.0, `"timeout_ms" has the wrong type`},
		{"reset of wrong type", `{"id":21,"op":"execute","session":"B","script":"x=1","reset":"yes"}`, 21.0, `"reset" has the wrong type`},
		{"missing script", `{"id":22,"op":"execute","session":"B"}`, 22.0, `missing field "script"`},
		{"empty script", `{"id":23,"op":"execute","session":"B","script":""}`, 23.0, "Missing required parameter: script"},
		{"detach session of wrong type", `{"id":24,"op":"detach","session":[]}`, 24.0, `"session" has the wrong type`},
		{"approve unknown id", `{"id":25,"op":"approve","approval_id":"appr_nope","decision":"allow"}`, 25.0, "not_pending"},
		{"approve id of wrong type", `{"id":26,"op":"approve","approval_id":1,"decision":"allow"}`, 26.0, `"approval_id" has the wrong type`},
		{"approve without decision", `{"id":27,"op":"approve","approval_id":"appr_nope"}`, 27.0, `"decision"`},
	}
	for _, tc := range cases {
		h.send(tc.line)
		a := h.answer()
		msg, _ := a["error"].(string)
		assert.Contains(t, msg, tc.want, tc.name)
		assert.Equal(t, tc.id, a["id"], tc.name)
		assert.Len(t, a, 2, "%s: one id and one error: %v", tc.name, a)
	}

	// Requests that are valid but name nothing known are not errors.
	h.send(`{"id":30,"op":"detach","session":"never-attached"}`)
	assert.Equal(t, map[string]any{"id": 30.0, "ok": true}, h.answer())
	h.send(`{"id":31,"op":"execute","session":"never-attached","script":"text('isolated')"}`)
	a := h.answer()
	assert.Equal(t, 31.0, a["id"])
	assert.Equal(t, []any{"isolated"}, blocks(t, a))
	assert.Equal(t, "missing_session_scope", a["result"].(map[string]any)["details"].(map[string]any)["fallback_reason"])

	// A second session is served while A's cell still runs.
	h.send(`{"id":"b1","op":"attach","session":"B","agent":"main"}`)
	assert.Equal(t, true, h.answer()["ok"])
	h.send(`{"id":"b2","op":"execute","session":"B","script":"n = 1\ntext('B works')"}`)
	assert.Equal(t, []any{"B works"}, blocks(t, h.answer()))
	h.send(`{"id":"b3","op":"snapshot"}`)
	snap := h.answer()["snapshot"].(map[string]any)
	assert.Equal(t, 2.0, snap["capacity"].(map[string]any)["live"])
	assert.Equal(t, 1.0, snap["inflight_cells"], "A's cell is still running")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	a = h.answer()
	assert.Equal(t, "a2", a["id"])
	assert.Equal(t, []any{"released"}, blocks(t, a))
}

// A CLI started with SIGINT ignored (`trap ” INT`, a background job of a
// non-interactive shell) still gives python a working SIGINT. (The CLI
// itself handles SIGINT to cancel its runs, so it un-ignores the signal;
// an embedding host that keeps it ignored is tested in integration.)
func TestHostStartedWithSIGINTIgnoredStillInterruptsPython(t *testing.T) {
	const script = `import os, signal, time
def ignores_sigint(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
text("python ignores SIGINT: %s" % ignores_sigint(os.getpid()))
text("handler is default_int_handler: %s" % (signal.getsignal(signal.SIGINT) is signal.default_int_handler))
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    text("no interrupt")
except KeyboardInterrupt:
    text("KeyboardInterrupt")
`
	want := []any{"python ignores SIGINT: False", "handler is default_int_handler: True", "KeyboardInterrupt"}
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", `trap '' INT; exec "$0" "$@"`, binary, "run", "--json", "--mode", mode, "-")
			cmd.Stdin = strings.NewReader(script)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			require.NoError(t, err, string(out))
			var res struct{ Blocks []any }
			require.NoError(t, json.Unmarshal(out, &res), string(out))
			assert.Equal(t, want, res.Blocks)
		})
	}
}

// The CLI's own peak memory stays bounded while a script floods 200 MB of
// output, and the spill holds every byte.
func TestRunFloodKeepsTheHostsPeakMemoryBounded(t *testing.T) {
	mb := 200
	if n, err := strconv.Atoi(os.Getenv("FLOOD_MB")); err == nil && n > 0 {
		mb = n
	}
	script := fmt.Sprintf("import sys\nchunk = (b'x' * 1023 + b'\\n') * 64\nfor _ in range(%d):\n    sys.stdout.buffer.write(chunk)\ntext('flooded')\n", mb*16)
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(binary, "run", "--json", "--mode", mode, "--timeout-ms", "120000", "-")
			cmd.Stdin = strings.NewReader(script)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			cmd.Dir = t.TempDir()
			var out bytes.Buffer
			cmd.Stdout = &out
			start := time.Now()
			require.NoError(t, cmd.Start())
			// The host's own peak, polled while it lives: the rusage of a
			// child forked from this (large) test process would count this
			// process's memory as the child's.
			hwm, err := waitPeakRSS(cmd)
			elapsed := time.Since(start)
			require.NoError(t, err, out.String())
			var res struct {
				Blocks  []string
				Details struct {
					Truncated      bool   `json:"truncated"`
					FullOutputPath string `json:"full_output_path"`
				}
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
			assert.Equal(t, []string{"flooded"}, res.Blocks)
			assert.True(t, res.Details.Truncated)
			fi, err := os.Stat(res.Details.FullOutputPath)
			require.NoError(t, err)
			assert.Equal(t, int64(mb)<<20, fi.Size())
			assert.Less(t, hwm, int64(64<<10), "host peak RSS %d KiB", hwm)
			t.Logf("%s: %d MiB through the CLI in %s; host peak RSS (VmHWM) %d KiB; %d bytes of JSON result",
				mode, mb, elapsed.Round(time.Millisecond), hwm, out.Len())
		})
	}
}

// peakRSS reads a live process's VmHWM in KiB.
// waitPeakRSS waits for cmd, polling its peak RSS (KiB) while it lives.
func waitPeakRSS(cmd *exec.Cmd) (int64, error) {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var peak int64
	for {
		if kb, ok := peakRSS(cmd.Process.Pid); ok {
			peak = kb
		}
		select {
		case err := <-waited:
			return peak, err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func peakRSS(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
