package executecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proctest"
)

// warmMarker is set in the host's environment before a runtime starts,
// so the tests find its interpreters (warm ones included) in /proc.
const warmMarker = "EXECUTE_CODE_WARM_TEST"

// surroundingsScript reports what a script sees of its interpreter, with
// its workspace (the helper module's directory) and its temporary
// directory as placeholders, since every run has its own.
const surroundingsScript = `
import fcntl, json, os, resource, signal, stat, sys
import exec_tools
ws = os.path.dirname(exec_tools.__file__)
fds = {}
for n in range(64):  # /proc/self/fd is out of a confined script's reach
    try:
        st = os.fstat(n)
    except OSError:
        continue
    fds[n] = [stat.S_IFMT(st.st_mode), fcntl.fcntl(n, fcntl.F_GETFL), fcntl.fcntl(n, fcntl.F_GETFD)]
d = {
    "pid": os.getpid(),
    "argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "environ": sorted(os.environ.items()),
    "fds": fds, "flags": repr(sys.flags),
    "limits": [resource.getrlimit(getattr(resource, r)) for r in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")],
    "sigint": str(signal.getsignal(signal.SIGINT)),
    "streams": [[s.line_buffering, s.write_through, s.seekable()] for s in (sys.stdout, sys.stderr)],
    "user_site": __import__("site").USER_SITE,
}
s = json.dumps(d)
tmp = os.environ.get("TMPDIR", "")
if tmp.startswith(ws):
    s = s.replace(tmp, "<tmp>")
text(s.replace(ws, "<ws>"))
`

// surroundings runs surroundingsScript on r (in a new kernel in session
// mode) and returns what it reported, its pid apart.
func surroundings(t *testing.T, r *rig, mode config.Mode, session string) (map[string]any, int) {
	t.Helper()
	var o *executecode.Owner
	if mode == config.Session {
		o = r.attach(session)
	}
	res := r.run(o, surroundingsScript)
	require.Len(t, res.Blocks, 1, res.Text())
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Blocks[0]), &got), res.Blocks[0])
	pid := int(got["pid"].(float64))
	delete(got, "pid")
	return got, pid
}

// warmPids waits until r's snapshot counts n warm interpreters and
// returns the pids of the runtime's interpreters that carry marker.
func warmPids(t *testing.T, r *rig, n int, marker string) []int {
	t.Helper()
	r.waitSnapshot(func(s executecode.Snapshot) bool { return s.WarmInterpreters == n }, "warm interpreters")
	pids := proctest.Marked(warmMarker, marker)
	require.GreaterOrEqual(t, len(pids), n)
	return pids
}

func warmRig(t *testing.T, mode config.Mode, sandbox bool, warm int, root string) *rig {
	tune := []rigOption{withRoot(root), withCfg(func(c *config.Config) {
		c.KernelMode = mode
		c.WarmInterpreters = warm
	})}
	if sandbox {
		return sandboxRig(t, mode, proctest.Python(t), tune...)
	}
	return newRig(t, tune...)
}

// A script run on a warm interpreter sees what one run on an interpreter
// started for it sees, per call and in a new kernel, confined or not:
// argv, sys.path, the working directory, the environment, every
// descriptor, the limits, SIGINT and the streams.
func TestWarmAndColdInterpretersRunAScriptAlike(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		for _, sandbox := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sandbox=%v", mode, sandbox), func(t *testing.T) {
				marker := t.Name()
				t.Setenv(warmMarker, marker)
				root := t.TempDir()
				cold := warmRig(t, mode, sandbox, 0, root)
				coldGot, _ := surroundings(t, cold, mode, "cold")

				warm := warmRig(t, mode, sandbox, 1, root)
				pids := warmPids(t, warm, 1, marker)
				warmGot, pid := surroundings(t, warm, mode, "warm")
				assert.Contains(t, pids, pid, "the run took the warm interpreter")
				assert.Equal(t, coldGot, warmGot)
				assert.Equal(t, 0, cold.snapshot().WarmInterpreters, "warm_interpreters = 0 keeps none")
				if sandbox {
					res := warm.run(nil, "x = 1")
					require.NotNil(t, res.Details.Sandbox, res.Text())
					assert.True(t, res.Details.Sandbox.FS && res.Details.Sandbox.Seccomp)
				}
			})
		}
	}
}

// attackNextScript is run confined on one warm interpreter while another
// waits for the next run; it tries to signal that one, kill it, read its
// environment and command line and write into its descriptors through
// /proc, and reports each attempt.
const attackNextScript = `
import json, os, signal
res = {}
for pid in %s:
    if pid == os.getpid():
        continue
    def attempt(name, f):
        try:
            f()
            res[name] = "ok"
        except OSError as e:
            res[name] = "denied"
    attempt("signal", lambda: os.kill(pid, 0))
    attempt("kill", lambda: os.kill(pid, signal.SIGKILL))
    attempt("environ", lambda: open("/proc/%%d/environ" %% pid, "rb").read())
    attempt("cmdline", lambda: open("/proc/%%d/cmdline" %% pid, "rb").read())
    for fd in (0, 1, 2, 3):
        attempt("fd%%d" %% fd, lambda: os.close(os.open("/proc/%%d/fd/%%d" %% (pid, fd), os.O_WRONLY | os.O_NONBLOCK)))
text(json.dumps(res))
`

// A confined script cannot reach the warm interpreter that will serve
// the next run or kernel: it was started by the host, outside the
// script's Landlock domain, so the script can neither signal it nor open
// anything of it through /proc; the next run takes it and is confined.
func TestAConfinedScriptCannotReachTheNextWarmInterpreter(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			marker := t.Name()
			t.Setenv(warmMarker, marker)
			r := warmRig(t, mode, true, 2, t.TempDir())
			pids := warmPids(t, r, 2, marker)
			var o *executecode.Owner
			if mode == config.Session {
				o = r.attach("attacker")
			}
			list, _ := json.Marshal(pids)
			res := r.run(o, fmt.Sprintf(attackNextScript, list))
			require.Len(t, res.Blocks, 1, res.Text())
			var got map[string]string
			require.NoError(t, json.Unmarshal([]byte(res.Blocks[0]), &got))
			require.NotEmpty(t, got, "another warm interpreter was attacked")
			for name, v := range got {
				assert.Equal(t, "denied", v, name)
			}
			var alive []int
			for _, pid := range pids {
				if proctest.Alive(pid) {
					alive = append(alive, pid)
				}
			}
			require.NotEmpty(t, alive, "the other warm interpreter lives")
			var next *executecode.Owner
			if mode == config.Session {
				next = r.attach("next")
			}
			res = r.run(next, "import os\ntext(str(os.getpid()))")
			require.Len(t, res.Blocks, 1, res.Text())
			pid, _ := strconv.Atoi(res.Blocks[0])
			assert.True(t, slices.Contains(alive, pid), "the next run took the attacked interpreter: %d of %v", pid, alive)
			require.NotNil(t, res.Details.Sandbox)
			assert.True(t, res.Details.Sandbox.FS)
		})
	}
}

// A run on a warm interpreter keeps its deadline and its CPU limit.
func TestAWarmRunKeepsItsTimeoutAndCPULimit(t *testing.T) {
	marker := t.Name()
	t.Setenv(warmMarker, marker)
	r := warmRig(t, config.PerCall, false, 1, t.TempDir())
	warmPids(t, r, 1, marker)
	res := r.run(nil, "while True: pass", 1000)
	assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy, res.Text())

	cpu := newRig(t, withCfg(func(c *config.Config) {
		c.KernelMode, c.CPULimitSeconds, c.WarmInterpreters = config.PerCall, 1, 1
	}))
	cpu.waitSnapshot(func(s executecode.Snapshot) bool { return s.WarmInterpreters == 1 }, "warm")
	res = cpu.run(nil, "while True: pass", 20000)
	assert.Equal(t, executecode.KilledByCPULimit, res.Details.KilledBy, res.Text())
}

// The snapshot counts the interpreters waiting for a run: as many as
// configured, again after a run took one.
func TestTheSnapshotCountsWarmInterpreters(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := warmRig(t, mode, false, 2, t.TempDir())
			r.waitSnapshot(func(s executecode.Snapshot) bool { return s.WarmInterpreters == 2 }, "two warm")
			var o *executecode.Owner
			if mode == config.Session {
				o = r.attach("s")
			}
			r.run(o, "x = 1")
			r.waitSnapshot(func(s executecode.Snapshot) bool { return s.WarmInterpreters == 2 }, "replaced")
			b, err := json.Marshal(r.snapshot())
			require.NoError(t, err)
			assert.Contains(t, string(b), `"warm_interpreters":2`)
		})
	}
}

// Close ends every interpreter the runtime started ahead, those still in
// their start-up too.
func TestCloseLeavesNoWarmInterpreter(t *testing.T) {
	for i, mode := range []config.Mode{config.PerCall, config.Session, config.PerCall} {
		marker := t.Name() + strconv.Itoa(i)
		t.Setenv(warmMarker, marker)
		cfg := config.Defaults()
		cfg.Enabled, cfg.KernelMode, cfg.WarmInterpreters = true, mode, 3
		rt, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()), executecode.WithTmpDir(t.TempDir()))
		require.NoError(t, err)
		if i == 2 {
			// Once they are warm.
			require.Eventually(t, func() bool {
				s, err := rt.Snapshot(context.Background())
				return err == nil && s.WarmInterpreters == 3
			}, waitFor, 5*time.Millisecond)
		}
		require.NoError(t, rt.Close(context.Background()))
		assert.Empty(t, proctest.Marked(warmMarker, marker), "%s: left after Close", mode)
	}
}
