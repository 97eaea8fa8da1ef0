package proc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proctest"
)

// identityScript reports, as one JSON line, everything of its
// surroundings a program can see and a start could get wrong: argv,
// sys.path, __main__, the working directory, the environment in order,
// every descriptor's kind and flags, the standard streams, the limits,
// the signal dispositions and what is imported when it starts. It writes
// "fd3" into its fd 3 and reads its fd 5 when it has them.
const identityScript = `import sys
MODS = sorted(sys.modules)
G = sorted(globals())
import fcntl, json, os, resource, signal, stat
def fds():
    out = {}
    for n in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(n))
        except OSError:
            continue
        out[n] = [stat.S_IFMT(st.st_mode), fcntl.fcntl(int(n), fcntl.F_GETFL), fcntl.fcntl(int(n), fcntl.F_GETFD)]
    return out
def stream(s):
    return [type(s).__name__, s.encoding, s.errors, s.line_buffering, s.write_through, s.seekable(), s.isatty(),
            type(s.buffer).__name__, getattr(s.buffer, "raw", s.buffer).name]
import __main__
m = __main__
have = fds()
if "3" in have:
    os.write(3, b"fd3")
if "5" in have:
    have["5 content"] = os.pread(5, 100, 0).decode()
lims = {r: resource.getrlimit(getattr(resource, r)) for r in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")}
sigs = {n: str(signal.getsignal(getattr(signal, n))) for n in ("SIGINT", "SIGPIPE", "SIGXFSZ", "SIGTERM", "SIGCHLD")}
print(json.dumps({
    "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "cwd": os.getcwd(),
    "environ": list(os.environ.items()), "fds": have, "limits": lims, "signals": sigs,
    "stdin": stream(sys.stdin), "stdout": stream(sys.stdout), "stderr": stream(sys.stderr),
    "modules": MODS, "globals": G, "file": m.__file__, "cached": m.__cached__, "spec": repr(m.__spec__),
    "loader": [type(m.__loader__).__name__, m.__loader__.name, m.__loader__.path], "name": m.__name__,
    "doc": m.__doc__, "package": m.__package__, "flags": repr(sys.flags), "executable": sys.executable,
    "prefix": [sys.prefix, sys.exec_prefix], "dont_write_bytecode": sys.dont_write_bytecode,
    "user_site": __import__("site").USER_SITE, "user_base": __import__("site").USER_BASE,
    # As ps shows it: a launched interpreter's is one string.
    "cmdline": open("/proc/self/cmdline", "rb").read().replace(b"\0", b" ").strip().decode(),
}), flush=True)
`

// mainFile stages source, Bootstrap first as the runner and the helper
// module carry it, in a directory of its own.
func mainFile(t *testing.T, source string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "main.py")
	require.NoError(t, os.WriteFile(path, []byte(Bootstrap+source), 0o600))
	return path
}

// startHow is one way of starting a program: the Spawner's direct start
// (`python3 FLAGS MAIN` with Args), a launch on an interpreter forked for
// it, or a launch on a warm one.
type startHow int

const (
	direct startHow = iota
	cold
	warm
)

func (h startHow) String() string { return [...]string{"direct", "cold", "warm"}[h] }

// mainCmd is a command of either shape the runtime uses: a per-call run
// (extra files, one output) or a kernel (-u, stdin socket, own stderr).
func mainCmd(t *testing.T, main string, kernel bool, out, errOut *syncBuffer) Command {
	// Without PYTHONUNBUFFERED, so that the streams' buffering is the
	// shape's own.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONUNBUFFERED=") {
			env = append(env, kv)
		}
	}
	cmd := Command{Path: proctest.Python(t), Main: main, Dir: t.TempDir(), Output: out,
		Env:    append(env, "PYTHONDONTWRITEBYTECODE=1", "EXECUTE_CODE_WARM_TEST=1"),
		Limits: Limits{CPUSeconds: 30, MemoryMB: 1024, FsizeMB: 10, NProc: 4096}}
	if kernel {
		cmd.Flags = []string{"-u"}
		cmd.StdinSocket = true
		cmd.Stderr = errOut
		cmd.Env = env
		cmd.Limits.CPUHardUnlimited = true
	}
	return cmd
}

// startAs starts cmd the way h says. For direct it is a start with Args,
// whose stdin socket and extra files the test makes; for warm it first
// keeps one interpreter of cmd's shape warm and checks the start took it.
func startAs(t *testing.T, sp *Spawner, h startHow, cmd Command) *Process {
	t.Helper()
	ctx := context.Background()
	switch h {
	case direct:
		cmd.Args = append(append(append([]string{}, cmd.Flags...), cmd.Main), cmd.Args...)
		cmd.Main, cmd.Flags = "", nil
		if cmd.StdinSocket {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			child, host := os.NewFile(uintptr(fds[0]), "child"), os.NewFile(uintptr(fds[1]), "host")
			t.Cleanup(func() { host.Close() })
			defer child.Close()
			cmd.Stdin, cmd.StdinSocket = child, false
		}
	case warm:
		template := cmd
		sp.KeepWarm(1, 0, func() (Command, bool) { return template, true })
		require.Eventually(t, func() bool { return sp.Warm() == 1 }, hangGuard, time.Millisecond)
	}
	var warmPid int
	if h == warm {
		sp.pool.mu.Lock()
		warmPid = sp.pool.warm[0].p.Pid()
		sp.pool.mu.Unlock()
	}
	p, err := sp.Start(ctx, cmd)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		<-p.Done()
		if p.Stdin() != nil {
			p.Stdin().Close()
		}
	})
	if h == warm {
		require.Equal(t, warmPid, p.Pid(), "the start must take the warm interpreter")
		sp.KeepWarm(0, 0, func() (Command, bool) { return Command{}, false })
	}
	return p
}

// extraFiles are a pipe's write end (fd 3), a closed fd 4 and a file
// (fd 5); the returned read end shows what python wrote into fd 3.
func extraFiles(t *testing.T) ([]*os.File, *os.File) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	f, err := os.CreateTemp(t.TempDir(), "fd5")
	require.NoError(t, err)
	_, err = f.WriteString("five")
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close(); f.Close() })
	return []*os.File{w, nil, f}, r
}

// What a program sees must not depend on how its interpreter was started:
// the direct start the runtime used to make, a launch on an interpreter
// forked for the run, and one on an interpreter started ahead must agree
// on everything the identity script reports, for both shapes.
func TestWarmColdAndDirectStartsRunTheProgramAlike(t *testing.T) {
	for _, kernel := range []bool{false, true} {
		name := "per-call"
		if kernel {
			name = "kernel"
		}
		t.Run(name, func(t *testing.T) {
			sp := newSpawner(t)
			main := mainFile(t, identityScript)
			dir := t.TempDir()
			got := map[startHow]map[string]any{}
			for _, h := range []startHow{direct, cold, warm} {
				out, errOut := newSyncBuffer(), newSyncBuffer()
				cmd := mainCmd(t, main, kernel, out, errOut)
				cmd.Dir = dir
				var fd3 *os.File
				if !kernel {
					cmd.ExtraFiles, fd3 = extraFiles(t)
				}
				p := startAs(t, sp, h, cmd)
				waitDone(t, p)
				require.Equal(t, 0, p.Exit().Code, "%s: %s%s", h, out.String(), errOut.String())
				var v map[string]any
				require.NoError(t, json.Unmarshal([]byte(out.String()), &v), "%s: %s", h, out.String())
				got[h] = v
				if fd3 != nil {
					buf := make([]byte, 8)
					n, _ := fd3.Read(buf)
					assert.Equal(t, "fd3", string(buf[:n]), "%s: fd 3 must be the host's pipe", h)
				}
			}
			for key, want := range got[direct] {
				assert.Equal(t, want, got[cold][key], "cold start: %s", key)
				assert.Equal(t, want, got[warm][key], "warm start: %s", key)
			}
			if !kernel {
				fds := got[warm]["fds"].(map[string]any)
				assert.Equal(t, "five", fds["5 content"])
				assert.NotContains(t, fds, "4", "a nil extra file is a closed descriptor")
			}
			assert.Equal(t, []any{main}, got[warm]["argv"])
			assert.Equal(t, filepath.Dir(main), got[warm]["path"].([]any)[0])
		})
	}
}

// faultScripts end the ways a program can end badly; each must end, and
// print, exactly as under a direct start: the launcher's own frames never
// show in a traceback.
var faultScripts = map[string]string{
	"exception": "def f():\n    raise ValueError('boom')\nf()\n",
	"interrupt": "raise KeyboardInterrupt\n",
	"exit":      "import sys\nsys.exit(3)\n",
	"exit text": "raise SystemExit('bye')\n",
	"syntax":    "x = (\n",
	"hook":      "import sys\ndef h(t, v, tb):\n    import traceback\n    print('hook', ''.join(traceback.format_exception(v)))\nsys.excepthook = h\n1/0\n",
	"chained":   "try:\n    {}['k']\nexcept KeyError as e:\n    raise RuntimeError('again') from e\n",
}

func TestWarmAndColdStartsFailAsADirectStartDoes(t *testing.T) {
	sp := newSpawner(t)
	for name, script := range faultScripts {
		t.Run(name, func(t *testing.T) {
			main := mainFile(t, script)
			type end struct {
				out  string
				exit ExitStatus
			}
			got := map[startHow]end{}
			for _, h := range []startHow{direct, cold, warm} {
				out := newSyncBuffer()
				p := startAs(t, sp, h, mainCmd(t, main, false, out, nil))
				waitDone(t, p)
				e := p.Exit()
				e.StopRequested = false
				got[h] = end{out.String(), e}
			}
			assert.Equal(t, got[direct], got[cold])
			assert.Equal(t, got[direct], got[warm])
			assert.NotContains(t, got[warm].out, "execute-code")
			assert.NotContains(t, got[warm].out, "<string>")
		})
	}
}

// A missing program file is python's own complaint and exit status 2.
func TestALaunchOfAMissingFileFailsAsPythonDoes(t *testing.T) {
	sp := newSpawner(t)
	main := filepath.Join(t.TempDir(), "gone.py")
	got := map[startHow]string{}
	for _, h := range []startHow{direct, cold} {
		out := newSyncBuffer()
		p := startAs(t, sp, h, mainCmd(t, main, false, out, nil))
		waitDone(t, p)
		assert.Equal(t, 2, p.Exit().Code, "%s: %s", h, out.String())
		got[h] = out.String()
	}
	assert.Equal(t, got[direct], got[cold])
	assert.True(t, strings.Contains(got[cold], "can't open file"), got[cold])
}

// An interpreter given the program's source ahead compiles it and
// imports what its top-level import lines name while it waits; the
// program still sees what it would under a direct start but for those
// modules, already imported.
func TestAProgramCompiledAheadRunsAsADirectStart(t *testing.T) {
	sp := newSpawner(t)
	main := mainFile(t, identityScript)
	source, err := os.ReadFile(main)
	require.NoError(t, err)
	dir := t.TempDir()
	got := map[startHow]map[string]any{}
	for _, h := range []startHow{direct, cold, warm} {
		out, errOut := newSyncBuffer(), newSyncBuffer()
		cmd := mainCmd(t, main, true, out, errOut)
		cmd.Dir, cmd.MainSource = dir, string(source)
		p := startAs(t, sp, h, cmd)
		waitDone(t, p)
		require.Equal(t, 0, p.Exit().Code, "%s: %s%s", h, out.String(), errOut.String())
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out.String()), &v), "%s: %s", h, out.String())
		got[h] = v
	}
	for key, want := range got[direct] {
		if key == "modules" {
			continue
		}
		assert.Equal(t, want, got[cold][key], "cold start: %s", key)
		assert.Equal(t, want, got[warm][key], "warm start: %s", key)
	}
	for _, h := range []startHow{cold, warm} {
		mods := got[h]["modules"].([]any)
		for _, m := range got[direct]["modules"].([]any) {
			assert.Contains(t, mods, m, h)
		}
		for _, m := range []string{"json", "fcntl", "resource"} {
			assert.Contains(t, mods, m, "%s: imported ahead", h)
		}
	}
}

// The code compiled ahead runs only while the file holds exactly its
// source: a program file that changed since runs as it is now.
func TestAProgramThatChangedSinceItsSourceRunsAsItIsNow(t *testing.T) {
	sp := newSpawner(t)
	main := mainFile(t, "print('now')\n")
	out := newSyncBuffer()
	cmd := mainCmd(t, main, false, out, nil)
	cmd.MainSource = Bootstrap + "print('before')\n"
	p := startAs(t, sp, warm, cmd)
	waitDone(t, p)
	assert.Equal(t, "now\n", out.String())
}

// A module given with the command is compiled ahead and imported from the
// checked bytecode cache the launcher leaves beside it, while the file
// holds that source; a file that changed since is imported as it is now.
func TestAModuleCompiledAheadIsImportedFromItsCheckedCache(t *testing.T) {
	sp := newSpawner(t)
	for name, stale := range map[string]bool{"same": false, "changed": true} {
		t.Run(name, func(t *testing.T) {
			main := mainFile(t, `import helper, importlib.util, sys
data = open(helper.__cached__, "rb").read()
print(helper.WORD, int.from_bytes(data[4:8], "little"), helper.__loader__.__class__.__name__, helper.f.__code__.co_filename == helper.__file__)
`)
			source := "WORD = 'ahead'\ndef f():\n    pass\n"
			file := source
			if stale {
				file = "WORD = 'now'\ndef f():\n    pass\n"
			}
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(main), "helper.py"), []byte(file), 0o600))
			out := newSyncBuffer()
			cmd := mainCmd(t, main, false, out, nil)
			cmd.Module = ModuleSource{Name: "helper.py", Source: source}
			p := startAs(t, sp, warm, cmd)
			waitDone(t, p)
			want := "ahead 3 SourceFileLoader True\n" // flags 3: a checked hash-based cache
			if stale {
				want = "now 3 SourceFileLoader True\n" // the cache was refused and the file compiled
			}
			assert.Equal(t, want, out.String())
		})
	}
}
