package proc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// probeScript reports, as one JSON line, everything the launcher is
// supposed to have arranged before python started.
const probeScript = `
import ctypes, json, os, resource, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
pdeathsig = ctypes.c_int(-1)
libc.prctl(2, ctypes.byref(pdeathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
def lim(r):
    return list(resource.getrlimit(r))
print(json.dumps({
    "cpu": lim(resource.RLIMIT_CPU),
    "as": lim(resource.RLIMIT_AS),
    "fsize": lim(resource.RLIMIT_FSIZE),
    "nproc": lim(resource.RLIMIT_NPROC),
    "pid": os.getpid(),
    "sid": os.getsid(0),
    "pgid": os.getpgid(0),
    "pdeathsig": pdeathsig.value,
    "sigint_default": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "argv": sys.argv,
    "stdin": os.read(0, 16).decode(),
}))
`

type probe struct {
	CPU           []int64           `json:"cpu"`
	AS            []int64           `json:"as"`
	Fsize         []int64           `json:"fsize"`
	NProc         []int64           `json:"nproc"`
	PID           int               `json:"pid"`
	SID           int               `json:"sid"`
	PGID          int               `json:"pgid"`
	PdeathSig     int               `json:"pdeathsig"`
	SIGINTDefault bool              `json:"sigint_default"`
	Env           map[string]string `json:"env"`
	Cwd           string            `json:"cwd"`
	Argv          []string          `json:"argv"`
	Stdin         string            `json:"stdin"`
}

func runProbe(t *testing.T, sp *Spawner, lim Limits, extra ...func(*Command)) (probe, *Process) {
	t.Helper()
	p, out := startPython(t, sp, lim, probeScript, extra...)
	waitDone(t, p)
	require.Equal(t, 0, p.Exit().Code, "probe output: %s", out.String())
	var got probe
	require.NoError(t, json.Unmarshal([]byte(out.String()), &got), "probe output: %s", out.String())
	return got, p
}

func TestLauncherAppliesEveryLimit(t *testing.T) {
	sp := newSpawner(t)
	got, _ := runProbe(t, sp, Limits{CPUSeconds: 7, MemoryMB: 600, FsizeMB: 3, NProc: 77})

	assert.Equal(t, []int64{7, 8}, got.CPU, "CPU: soft = limit, hard one second later")
	assert.Equal(t, []int64{600 << 20, 600 << 20}, got.AS)
	assert.Equal(t, []int64{3 << 20, 3 << 20}, got.Fsize)
	assert.Equal(t, []int64{77, 77}, got.NProc)
	assert.Equal(t, "2", got.Env["MALLOC_ARENA_MAX"], "an AS limit caps glibc's arenas")
}

func TestLauncherLeavesUnsetLimitsAsInherited(t *testing.T) {
	sp := newSpawner(t)
	env := []string{"PATH=" + os.Getenv("PATH")}
	got, _ := runProbe(t, sp, Limits{}, func(c *Command) { c.Env = env })

	for name, tc := range map[string]struct {
		res int
		got []int64
	}{
		"cpu": {unix.RLIMIT_CPU, got.CPU}, "as": {unix.RLIMIT_AS, got.AS},
		"fsize": {unix.RLIMIT_FSIZE, got.Fsize}, "nproc": {unix.RLIMIT_NPROC, got.NProc},
	} {
		var host unix.Rlimit
		require.NoError(t, unix.Getrlimit(tc.res, &host))
		assert.Equal(t, []int64{int64(host.Cur), int64(host.Max)}, tc.got, name)
	}
	assert.NotContains(t, got.Env, "MALLOC_ARENA_MAX", "no AS limit, no arena cap")
}

func TestCPUHardLimitCanStayUnlimitedForKernels(t *testing.T) {
	sp := newSpawner(t)
	var host unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_CPU, &host))
	got, _ := runProbe(t, sp, Limits{CPUSeconds: 5, CPUHardUnlimited: true})
	assert.Equal(t, []int64{5, int64(host.Max)}, got.CPU)
}

func TestCallerChosenArenaCountIsKept(t *testing.T) {
	sp := newSpawner(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "MALLOC_ARENA_MAX=4"}
	got, _ := runProbe(t, sp, Limits{MemoryMB: 1024}, func(c *Command) { c.Env = env })
	assert.Equal(t, "4", got.Env["MALLOC_ARENA_MAX"])
}

func TestPythonLeadsItsOwnSessionWithParentDeathSignal(t *testing.T) {
	sp := newSpawner(t)
	got, p := runProbe(t, sp, Limits{})

	assert.Equal(t, p.Pid(), got.PID, "the launcher became python: same pid")
	assert.Equal(t, got.PID, got.SID, "own session")
	assert.Equal(t, got.PID, got.PGID, "own process group")
	assert.Equal(t, int(syscall.SIGKILL), got.PdeathSig)
}

func TestSIGINTIsDefaultEvenWhenHostIgnoresIt(t *testing.T) {
	sp := newSpawner(t)
	signal.Ignore(os.Interrupt)
	defer signal.Reset(os.Interrupt)

	got, _ := runProbe(t, sp, Limits{})
	assert.True(t, got.SIGINTDefault, "python must install KeyboardInterrupt, not inherit SIG_IGN")
}

func TestLauncherVariablesNeverReachPython(t *testing.T) {
	sp := newSpawner(t)
	t.Setenv("KERNELWORKER_TEST_MARK", "inherited")

	t.Run("host environment", func(t *testing.T) {
		got, _ := runProbe(t, sp, Limits{})
		assert.Equal(t, "inherited", got.Env["KERNELWORKER_TEST_MARK"], "nil Env means os.Environ()")
		assert.NotContains(t, got.Env, handshakeEnv)
		assert.NotContains(t, got.Env, guardEnv)
	})
	t.Run("explicit environment", func(t *testing.T) {
		env := []string{"PATH=" + os.Getenv("PATH"), "ONLY=this", handshakeEnv + "=9:1", guardEnv + "=1"}
		got, _ := runProbe(t, sp, Limits{MemoryMB: 2048}, func(c *Command) { c.Env = env })
		assert.Equal(t, "this", got.Env["ONLY"])
		assert.NotContains(t, got.Env, "KERNELWORKER_TEST_MARK", "explicit Env replaces the host's")
		assert.NotContains(t, got.Env, handshakeEnv, "a smuggled handshake is replaced, and removed before user code")
		assert.NotContains(t, got.Env, guardEnv)
	})
}

func TestCommandSetsDirArgsAndEmptyStdin(t *testing.T) {
	sp := newSpawner(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	got, _ := runProbe(t, sp, Limits{}, func(c *Command) {
		c.Dir = dir
		c.Args = append(c.Args, "first", "second")
	})
	assert.Equal(t, dir, got.Cwd)
	assert.Equal(t, []string{"-c", "first", "second"}, got.Argv)
	assert.Empty(t, got.Stdin, "stdin is /dev/null")
}

func TestExtraFilesBecomeDescriptorsFromThree(t *testing.T) {
	sp := newSpawner(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()

	p, out := startPython(t, sp, Limits{}, "import os; os.write(3, b'via fd 3'); os.close(3)",
		func(c *Command) { c.ExtraFiles = []*os.File{w} })
	require.NoError(t, w.Close())
	waitDone(t, p)
	require.Equal(t, 0, p.Exit().Code, out.String())

	buf := make([]byte, 64)
	n, err := r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "via fd 3", string(buf[:n]))
}

func TestStdoutAndStderrShareOnePipeInOrder(t *testing.T) {
	sp := newSpawner(t)
	script := `
import sys
for i in range(50):
    (sys.stdout if i % 2 == 0 else sys.stderr).write("%d\n" % i)
    (sys.stdout if i % 2 == 0 else sys.stderr).flush()
`
	out, st := runPython(t, sp, Limits{}, script)
	require.Equal(t, 0, st.Code, out)
	var want strings.Builder
	for i := range 50 {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	assert.Equal(t, want.String(), out)
}

func TestAddressSpaceLimitOf256MiBStillStartsPython(t *testing.T) {
	// The limit is applied to a started interpreter, which must still run
	// its program under it.
	sp := newSpawner(t)
	out, st := runPython(t, sp, Limits{MemoryMB: 256}, "print('started')")
	assert.Equal(t, 0, st.Code, out)
	assert.Equal(t, "started\n", out)
}

func TestAddressSpaceLimitTurnsHugeAllocationIntoMemoryError(t *testing.T) {
	sp := newSpawner(t)
	lim := Limits{MemoryMB: 512}
	out, st := runPython(t, sp, lim, "bytearray(1 << 30)")

	assert.Equal(t, 1, st.Code)
	assert.Contains(t, out, "MemoryError")
	assert.Equal(t, KilledByMemoryLimit, KilledBy(st, lim, "MemoryError", 0))
}

func TestCPULimitEndsSpinLoopWithSIGXCPU(t *testing.T) {
	sp := newSpawner(t)
	lim := Limits{CPUSeconds: 1}
	out, st := runPython(t, sp, lim, "while True: pass")

	require.True(t, st.Signaled, "output: %s", out)
	assert.Equal(t, syscall.SIGXCPU, st.Signal)
	assert.Equal(t, 128+int(syscall.SIGXCPU), st.Code)
	assert.Equal(t, KilledByCPULimit, KilledBy(st, lim, "", 0))
	assert.Equal(t, "Script killed: CPU limit (1 s) exceeded.", LimitHeadline(KilledByCPULimit, lim, st))
}

func TestFileSizeLimitSurfacesAsEFBIG(t *testing.T) {
	sp := newSpawner(t)
	dir := t.TempDir()
	lim := Limits{FsizeMB: 1}
	script := `
import sys
try:
    with open(sys.argv[1], "wb") as f:
        f.write(b"x" * (2 << 20))
except OSError as e:
    print("errno", e.errno)
`
	out, st := runPython(t, sp, lim, script, func(c *Command) {
		c.Args = append(c.Args, filepath.Join(dir, "big"))
	})
	assert.Equal(t, 0, st.Code, "python ignores SIGXFSZ: no signal death")
	assert.Equal(t, "errno 27\n", out)
	fi, err := os.Stat(filepath.Join(dir, "big"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())
	assert.Equal(t, KilledByFsizeLimit, KilledBy(st, lim, "OSError", 27))
}

// An interpreter that cannot be executed fails the start itself, with
// the reason, and leaves no process behind.
func TestStartReportsExecFailure(t *testing.T) {
	sp := newSpawner(t)
	notExec := filepath.Join(t.TempDir(), "python3")
	require.NoError(t, os.WriteFile(notExec, []byte("not a program"), 0o644))

	tests := []struct {
		name, path string
		want       error
	}{
		{"missing interpreter", filepath.Join(t.TempDir(), "missing"), syscall.ENOENT},
		{"not executable", notExec, syscall.EACCES},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := sp.Start(context.Background(), Command{Path: tc.path, Limits: Limits{MemoryMB: 256}})
			require.Error(t, err)
			assert.Nil(t, p)
			assert.True(t, errors.Is(err, tc.want), "%v", err)
			assert.Contains(t, err.Error(), tc.path)
		})
	}
}
