package executecode_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proctest"
)

// attackScript tries, from inside the sandbox, everything the sandbox
// must refuse and a few things it must allow, in the script itself, in a
// thread and in a python subprocess, and answers with one text() block:
// a JSON object of check -> "ok" or "denied <errno>". The params are a
// JSON object the test fills in.
const attackScript = `
import ctypes, errno, json, os, resource, socket, subprocess, sys, tempfile, threading
P = json.loads(%s)
R = {}
def check(name, f):
    try:
        f()
        R[name] = "ok"
    except OSError as e:
        R[name] = "denied " + errno.errorcode.get(e.errno, str(e.errno))
def connect(family, kind, addr, proto=0):
    s = socket.socket(family, kind, proto)
    try:
        if kind == socket.SOCK_DGRAM:
            s.sendto(b"escaped", addr)
        else:
            s.connect(addr)
            s.sendall(b"escaped")
    finally:
        s.close()

check("write_workspace", lambda: open(os.path.join(os.environ["HOME"], "w.txt"), "w").write("x"))
check("write_tmpdir", lambda: os.close(tempfile.mkstemp()[0]))
check("read_tool_root", lambda: open("tool.txt").read())
check("list_tool_root", lambda: os.listdir("."))
check("write_tool_root", lambda: open("new.txt", "w").close())
check("write_outside", lambda: open(os.path.join(P["outside_dir"], "escaped.txt"), "w").close())
check("read_outside", lambda: open(P["outside_file"]).read())
check("read_etc_passwd", lambda: open("/etc/passwd").read())
check("list_slash", lambda: os.listdir("/"))
for i, p in enumerate(P["private_files"]):
    check("read_private_%%d" %% i, lambda p=p: open(p, "rb").read())
for i, p in enumerate(P["private_dirs"]):
    check("list_private_%%d" %% i, lambda p=p: os.listdir(p))
check("tcp", lambda: connect(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", P["tcp"])))
check("mptcp", lambda: connect(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", P["tcp"]), 262))
check("udp", lambda: connect(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", P["udp"])))
check("unix", lambda: connect(socket.AF_UNIX, socket.SOCK_STREAM, P["unix"]))
check("unix_abstract", lambda: connect(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + P["abstract"]))
check("raw", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
check("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close())
check("socketpair", lambda: [s.close() for s in socket.socketpair()])
check("chmod_outside", lambda: os.chmod(P["chmod_target"], 0o777))
check("chown_outside", lambda: os.chown(P["chmod_target"], 65534, 65534))
check("utime_outside", lambda: os.utime(P["chmod_target"], (0, 0)))
check("kill_host", lambda: os.kill(P["host_pid"], 0))
check("kill_init", lambda: os.kill(1, 0))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
check("raise_rlimit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)))
check("lower_cpu_rlimit", lambda: resource.setrlimit(resource.RLIMIT_CPU, (1000, 1000)))
def unshare():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare")
check("unshare_user", unshare)
def new_session():
    subprocess.run([sys.executable, "-c", "pass"], start_new_session=True, check=True)
check("new_session_child", new_session)
def capabilities():
    libc = ctypes.CDLL(None, use_errno=True)
    header = ctypes.create_string_buffer(b"\x22\x05\x08\x20\0\0\0\0", 8)  # version 3, this process
    data = ctypes.create_string_buffer(24)
    if libc.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    return data.raw.hex()
R["capabilities"] = capabilities()

def in_thread():
    check("thread_write_outside", lambda: open(os.path.join(P["outside_dir"], "thread.txt"), "w").close())
    check("thread_read_outside", lambda: open(P["outside_file"]).read())
    check("thread_tcp", lambda: connect(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", P["tcp"])))
t = threading.Thread(target=in_thread)
t.start()
t.join()

child = r'''
import errno, json, os, resource, socket, sys
P = json.loads(sys.argv[1])
R = {}
def check(name, f):
    try:
        f()
        R[name] = "ok"
    except OSError as e:
        R[name] = "denied " + errno.errorcode.get(e.errno, str(e.errno))
check("child_write_outside", lambda: open(os.path.join(P["outside_dir"], "child.txt"), "w").close())
check("child_read_outside", lambda: open(P["outside_file"]).read())
check("child_udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", P["udp"])))
check("child_chmod_outside", lambda: os.chmod(P["chmod_target"], 0o777))
check("child_kill_host", lambda: os.kill(P["host_pid"], 0))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
check("child_raise_rlimit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)))
check("child_write_workspace", lambda: open(os.path.join(os.environ["HOME"], "child.txt"), "w").close())
check("child_setsid", os.setsid)
print(json.dumps(R))
'''
out = subprocess.run([sys.executable, "-c", child, json.dumps(P)], capture_output=True, text=True)
if out.returncode != 0:
    R["child"] = "failed: " + out.stderr
else:
    R.update(json.loads(out.stdout))
text(json.dumps(R, sort_keys=True))
`

// allowedInSandbox are the checks of attackScript that must succeed.
var allowedInSandbox = []string{
	"write_workspace", "write_tmpdir", "read_tool_root", "list_tool_root", "socketpair", "child_write_workspace",
}

// listeners are live loopback endpoints a confined script tries to
// reach; each must have seen nothing afterwards.
type listeners struct {
	tcp, unix, abstract net.Listener
	udp                 net.PacketConn
	unixPath            string
}

func listen(t *testing.T) *listeners {
	t.Helper()
	l := &listeners{}
	var err error
	l.tcp, err = net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	l.udp, err = net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	// A short directory: a Unix socket path holds at most 107 bytes.
	dir, err := os.MkdirTemp("", "sbx")
	require.NoError(t, err)
	l.unixPath = filepath.Join(dir, "s")
	l.unix, err = net.Listen("unix", l.unixPath)
	require.NoError(t, err)
	l.abstract, err = net.Listen("unix", "@execute-code-sandbox-test-"+filepath.Base(dir))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = l.tcp.Close()
		_ = l.udp.Close()
		_ = l.unix.Close()
		_ = l.abstract.Close()
		_ = os.RemoveAll(dir)
	})
	return l
}

// assertUntouched: nothing connected or arrived. Everything the script
// sent was sent before its result, so it would be queued by now.
func (l *listeners) assertUntouched(t *testing.T) {
	t.Helper()
	for name, ln := range map[string]net.Listener{"tcp": l.tcp, "unix": l.unix, "abstract unix": l.abstract} {
		switch d := ln.(type) {
		case *net.TCPListener:
			require.NoError(t, d.SetDeadline(time.Now()))
		case *net.UnixListener:
			require.NoError(t, d.SetDeadline(time.Now()))
		}
		c, err := ln.Accept()
		if err == nil {
			_ = c.Close()
		}
		assert.Error(t, err, "the %s listener was reached", name)
	}
	require.NoError(t, l.udp.SetReadDeadline(time.Now()))
	buf := make([]byte, 64)
	n, _, err := l.udp.ReadFrom(buf)
	assert.Error(t, err, "the udp listener received %q", buf[:n])
}

func (l *listeners) params() map[string]any {
	return map[string]any{
		"tcp":      l.tcp.Addr().(*net.TCPAddr).Port,
		"udp":      l.udp.LocalAddr().(*net.UDPAddr).Port,
		"unix":     l.unixPath,
		"abstract": strings.TrimPrefix(l.abstract.Addr().String(), "@"),
	}
}

// sandboxRig is a runtime with sandbox = "landlock" over python.
func sandboxRig(t *testing.T, mode config.Mode, python string, tune ...rigOption) *rig {
	t.Helper()
	tune = append([]rigOption{withCfg(func(c *config.Config) {
		c.KernelMode = mode
		c.Sandbox = config.SandboxLandlock
		c.PythonPath = python
	})}, tune...)
	r := newRig(t, tune...)
	writeFile(t, r.root, "tool.txt", "tool root content\n")
	return r
}

// makeVenv makes a virtualenv with the system python3 in a temp dir of
// the test and returns its python3.
func makeVenv(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(proctest.Python(t), "-m", "venv", "--without-pip", dir).CombinedOutput()
	require.NoError(t, err, "python3 -m venv: %s", out)
	return filepath.Join(dir, "bin", "python3")
}

type interpreterCase struct {
	name   string
	python func(t testing.TB) string
}

var interpreters = []interpreterCase{
	{"system", proctest.Python},
	{"venv", makeVenv},
}

// runAttack runs attackScript as a call of o with outside paths of the
// test, and returns its checks and the result.
func runAttack(t *testing.T, r *rig, o *executecode.Owner, l *listeners, privateFiles, privateDirs []string) (map[string]string, executecode.Result) {
	t.Helper()
	outside := t.TempDir()
	params := l.params()
	params["outside_dir"] = outside
	params["outside_file"] = writeFile(t, outside, "secret.txt", "outside the sandbox\n")
	target := writeFile(t, outside, "target.txt", "mode and owner stay\n")
	require.NoError(t, os.Chmod(target, 0o600))
	params["chmod_target"] = target
	params["host_pid"] = os.Getpid()
	params["private_files"] = append([]string{}, privateFiles...)
	params["private_dirs"] = append([]string{}, privateDirs...)
	p, err := json.Marshal(params)
	require.NoError(t, err)
	res := r.run(o, fmt.Sprintf(attackScript, pyString(t, string(p))))
	require.Len(t, res.Blocks, 1, res.Text())
	var checks map[string]string
	require.NoError(t, json.Unmarshal([]byte(res.Blocks[0]), &checks), res.Blocks[0])

	fi, err := os.Stat(target)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "chmod outside the workspace took effect")
	for _, name := range []string{"escaped.txt", "thread.txt", "child.txt"} {
		assert.NoFileExists(t, filepath.Join(outside, name))
	}
	assert.NoFileExists(t, filepath.Join(r.root, "new.txt"))
	l.assertUntouched(t)
	return checks, res
}

func pyString(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// assertConfined: exactly the allowed checks succeeded, and every other
// one was refused by the kernel.
func assertConfined(t *testing.T, checks map[string]string) {
	t.Helper()
	require.NotContains(t, checks, "child", checks["child"])
	assert.Equal(t, strings.Repeat("0", 48), checks["capabilities"], "capabilities left")
	for name, got := range checks {
		if name == "capabilities" {
			continue
		}
		if contains(allowedInSandbox, name) {
			assert.Equal(t, "ok", got, name)
			continue
		}
		assert.True(t, strings.HasPrefix(got, "denied "), "%s: %s", name, got)
	}
	for _, name := range allowedInSandbox {
		assert.Contains(t, checks, name)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The sandbox, per call and in a session kernel, with the system python3
// and a virtualenv: the workspace is writable and the tool root readable;
// everything else outside the interpreter's own files is neither readable
// nor writable, no socket reaches a live loopback listener (TCP, MPTCP,
// UDP, pathname and abstract Unix), the host cannot be signalled, root's
// chmod, chown and utime of a file outside fail, rlimits cannot be
// changed, and a thread and a subprocess are held to every rule.
func TestASandboxedScriptIsConfinedToItsWorkspace(t *testing.T) {
	for _, py := range interpreters {
		for _, mode := range []config.Mode{config.PerCall, config.Session} {
			t.Run(py.name+"/"+string(mode), func(t *testing.T) {
				r := sandboxRig(t, mode, py.python(t))
				var o *executecode.Owner
				if mode == config.Session {
					o = r.attach("s1")
				}
				checks, res := runAttack(t, r, o, listen(t), nil, []string{r.tmp})
				assertConfined(t, checks)
				require.NotNil(t, res.Details.Sandbox, "details report the sandbox")
				assert.Equal(t, executecode.SandboxStatus{ABI: res.Details.Sandbox.ABI, FS: true, Net: true, Scoped: true, Seccomp: true}, *res.Details.Sandbox)
				assert.GreaterOrEqual(t, res.Details.Sandbox.ABI, 6)
				assert.Equal(t, *res.Details.Sandbox, r.snapshot().Sandbox, "the snapshot reports what calls run under")
			})
		}
	}
}

// Another session's kernel workspace, its files and the staging root are
// unreadable to a confined cell, as is a per-call run's workspace to a
// later run.
func TestASandboxedCellCannotReadAnotherSessionsWorkspace(t *testing.T) {
	r := sandboxRig(t, config.Session, proctest.Python(t))
	a, b := r.attach("a"), r.attach("b")
	res := r.run(a, "import os\nopen(os.path.join(os.environ['HOME'], 'secret.txt'), 'w').write('a secret')\ntext('a')")
	require.Equal(t, []string{"a"}, res.Blocks, res.Text())
	secrets, err := filepath.Glob(filepath.Join(r.tmp, "execute-code-private-*", "python-kernel-*", "kernel-*", "secret.txt"))
	require.NoError(t, err)
	require.Len(t, secrets, 1, "session a's secret, seen from the host")
	home := filepath.Dir(filepath.Dir(secrets[0]))
	root := filepath.Dir(home)
	checks, _ := runAttack(t, r, b, listen(t), secrets, []string{home, filepath.Dir(secrets[0]), root})
	assertConfined(t, checks)
	assert.Equal(t, "denied EACCES", checks["read_private_0"])
	// The owner itself still reads its own.
	res = r.run(a, "import os\ntext(open(os.path.join(os.environ['HOME'], 'secret.txt')).read())")
	assert.Equal(t, []string{"a secret"}, res.Blocks)
}

// The helpers run in the host, so they reach what the script itself may
// not: the tool root through read, grep and ls, and a host tool.
func TestHelpersWorkUnderTheSandbox(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := sandboxRig(t, mode, proctest.Python(t), withOption(executecode.WithHostTool(weatherSpec, newWeather())))
			var o *executecode.Owner
			if mode == config.Session {
				o = r.attach("s1")
			}
			res := r.run(o, "text(read('tool.txt'))\ntext(grep('content'))\ntext(ls('.'))\ntext(weather('Oslo'))")
			require.Len(t, res.Blocks, 4, res.Text())
			assert.Contains(t, res.Blocks[0], "tool root content")
			assert.Contains(t, res.Blocks[1], "tool.txt:1:tool root content")
			assert.Contains(t, res.Blocks[2], "tool.txt")
			assert.Equal(t, "Oslo: 4 degrees (metric)", res.Blocks[3])
			assert.Equal(t, 4, res.Details.RPCCalls)
		})
	}
}

// The rlimits still hold a confined interpreter: a per-call run and a
// session cell spinning past their CPU limit are killed for it (the
// kernel's per-cell budget is raised by the host with prlimit(2), which
// the sandbox leaves to the host alone).
func TestLimitsStillApplyUnderTheSandbox(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := sandboxRig(t, mode, proctest.Python(t), withCfg(func(c *config.Config) { c.CPULimitSeconds = 1 }))
			var o *executecode.Owner
			if mode == config.Session {
				o = r.attach("s1")
				res := r.run(o, "x = 1")
				require.Empty(t, res.Details.KilledBy, res.Text())
			}
			res := r.run(o, "while True: pass", 20000)
			assert.Equal(t, executecode.KilledByCPULimit, res.Details.KilledBy, res.Text())
		})
	}
}

// Fail closed: an interpreter that cannot confine itself never runs the
// script, per call (a tool error before any code) or in a session (its
// kernel fails to start, the call falls back, and the isolated run fails
// the same way), and the error names what is missing.
func TestASandboxThatCannotBeAppliedRunsNothing(t *testing.T) {
	cases := []struct {
		name string
		tune func(*executecode.Runtime)
		want string
	}{
		{"kernel ABI below the rules'", func(rt *executecode.Runtime) { executecode.RequireSandboxABI(rt, 99) }, "need at least 99"},
		{"a rule the kernel refuses", func(rt *executecode.Runtime) { executecode.AddSandboxRule(rt, "/proc/self/ns/net") }, "landlock rule for /proc/self/ns/net"},
		{"a rule for a missing path", func(rt *executecode.Runtime) {
			executecode.AddSandboxRule(rt, "/nonexistent/execute-code-sandbox")
		}, "rule for /nonexistent/execute-code-sandbox"},
	}
	for _, c := range cases {
		for _, mode := range []config.Mode{config.PerCall, config.Session} {
			t.Run(c.name+"/"+string(mode), func(t *testing.T) {
				r := sandboxRig(t, mode, proctest.Python(t), beforeUse(c.tune))
				var o *executecode.Owner
				if mode == config.Session {
					o = r.attach("s1")
				}
				marker := filepath.Join(t.TempDir(), "ran")
				res, err := r.exec(o, fmt.Sprintf("open(%q, 'w').close()", marker))
				require.Error(t, err)
				assert.True(t, errors.Is(err, executecode.ErrSandbox), "%v", err)
				assert.Contains(t, err.Error(), c.want)
				assert.Contains(t, res.Text(), c.want)
				assert.NoFileExists(t, marker, "the script ran")
				if mode == config.Session {
					assert.Contains(t, r.trace(), "fallback(startup_failed)")
				}
			})
		}
	}
}

// A site hook that starts a thread before the bootstrap leaves a thread
// the sandbox could not confine: the interpreter refuses to run.
func TestASandboxRefusesAnInterpreterWithAThreadAlreadyRunning(t *testing.T) {
	python := makeVenv(t)
	site, err := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(python)), "lib", "python3*", "site-packages"))
	require.NoError(t, err)
	require.Len(t, site, 1)
	writeFile(t, site[0], "zz_thread.pth", "import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
	r := sandboxRig(t, config.PerCall, python)
	marker := filepath.Join(t.TempDir(), "ran")
	_, err = r.exec(nil, fmt.Sprintf("open(%q, 'w').close()", marker))
	require.ErrorIs(t, err, executecode.ErrSandbox)
	assert.Contains(t, err.Error(), "threads run before the sandbox")
	assert.NoFileExists(t, marker)
}

// A tool root that contains the staging directory would show every run's
// workspace to every script: refused.
func TestASandboxRefusesAToolRootHoldingTheStagingRoot(t *testing.T) {
	// The rig's staging TMPDIR is another temp dir of the test, so this
	// root holds it.
	root := filepath.Dir(t.TempDir())
	r := newRig(t, withRoot(root), withCfg(func(c *config.Config) {
		c.KernelMode = config.PerCall
		c.Sandbox = config.SandboxLandlock
	}))
	require.True(t, strings.HasPrefix(r.tmp, root+"/"), "%s holds %s", root, r.tmp)
	_, err := r.exec(nil, "print(1)")
	require.ErrorIs(t, err, executecode.ErrSandbox)
	assert.Contains(t, err.Error(), "the tool root")
}

// The snapshot says no sandbox when none is configured, and results carry
// no sandbox key.
func TestAnUnsandboxedRuntimeReportsNoProtections(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	res := r.run(nil, "print(1)")
	assert.Nil(t, res.Details.Sandbox)
	assert.Equal(t, executecode.SandboxStatus{}, r.snapshot().Sandbox)
	b, err := json.Marshal(res.Details)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "sandbox")
}

// New refuses a sandbox value it does not know, naming the key.
func TestNewRefusesAnUnknownSandbox(t *testing.T) {
	cfg := config.Defaults()
	cfg.Sandbox = "docker"
	_, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()))
	require.ErrorIs(t, err, executecode.ErrConfig)
	assert.Contains(t, err.Error(), `sandbox = "docker"`)
}
