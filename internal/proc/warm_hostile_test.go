package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// plantedModules are what a script could leave in a directory a later
// interpreter starts or runs in, each of them a module the bootstrap,
// the launcher, the sandbox or python's start-up imports. A planted one
// that ran would leave its name in the tell-tale directory.
var plantedModules = []string{"_socket", "_signal", "ctypes", "struct", "os", "sitecustomize", "usercustomize", "encodings", "posixpath"}

func plant(t *testing.T, dir, tell string) {
	for _, m := range plantedModules {
		src := "open(" + strconv.Quote(filepath.Join(tell, m)) + ", 'w').close()\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, m+".py"), []byte(src), 0o600))
	}
}

// Nothing a script can write into the working directory reaches a later
// interpreter: neither one started ahead in it (its start-up and
// launcher) nor its program's imports of the standard library, since
// python's "" path entry is gone before anything is imported.
func TestModulesPlantedInTheWorkingDirectoryNeverRun(t *testing.T) {
	sp := newSpawner(t)
	root, tell := t.TempDir(), t.TempDir()
	plant(t, root, tell)
	cmd := Command{Path: proctest.Python(t), Main: mainFile(t, "import ctypes, struct, socket, os\nprint('hello')\n"), Dir: root}
	keepWarm(t, sp, 1, 0, cmd)
	for range 2 { // warm, then cold (the replacement may still start)
		_, out, exit := run(t, sp, cmd)
		assert.Equal(t, "hello\n", out)
		assert.Equal(t, 0, exit.Code)
	}
	left, err := os.ReadDir(tell)
	require.NoError(t, err)
	assert.Empty(t, left, "a planted module ran")
}

// hostileScript attacks the interpreter that will serve the next run,
// given its pid in a file: it opens the handshake through /proc (a
// socket cannot be opened again that way), writes into its start-up
// output pipes and stdin through /proc, and reports what it could do.
const hostileScript = `import os, sys, time
path = sys.argv[1]
while not os.path.exists(path + ".ready"):
    time.sleep(0.005)
pid = int(open(path).read())
res = []
for fd, mode in ((3, os.O_RDWR), (1, os.O_WRONLY), (2, os.O_WRONLY), (0, os.O_RDWR)):
    try:
        f = os.open("/proc/%d/fd/%d" % (pid, fd), mode | os.O_NONBLOCK)
    except OSError as e:
        res.append("%d:%s" % (fd, e.strerror))
        continue
    try:
        os.write(f, b"FORGED-BY-THE-PREVIOUS-RUN\n" * 100)
        res.append("%d:written" % fd)
    except OSError as e:
        res.append("%d:%s" % (fd, e.strerror))
    os.close(f)
print(" ".join(res))
`

// A run cannot reach the warm interpreter that serves the next: that
// one was started by the host, not by the run, its handshake cannot be
// opened through /proc, and whatever the run writes into the pipes it
// started with is never part of the next run's output, whose
// surroundings are a fresh interpreter's.
func TestARunCannotReachTheNextWarmInterpreter(t *testing.T) {
	sp := newSpawner(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	hostile := Command{Path: proctest.Python(t), Main: mainFile(t, hostileScript), Args: []string{pidFile}, Dir: dir}
	victim := hostile
	victim.Main, victim.Args = mainFile(t, identityScript), nil
	keepWarm(t, sp, 2, 0, hostile)
	_, cold, _ := run(t, sp, Command{Path: victim.Path, Main: victim.Main, Dir: dir, Env: append(os.Environ(), "EXECUTE_CODE_OTHER=1")})

	out := newSyncBuffer()
	hostile.Output = out
	p, err := sp.Start(t.Context(), hostile)
	require.NoError(t, err)
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	next := warmPids(sp)[0] // the other warm one: the next run's
	require.NotEqual(t, p.Pid(), next)
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(next)), 0o600))
	require.NoError(t, os.WriteFile(pidFile+".ready", nil, 0o600))
	waitDone(t, p)
	assert.Contains(t, out.String(), "3:No such device or address", "the handshake must not open through /proc")

	pid, got, exit := run(t, sp, victim)
	require.Equal(t, next, pid, "the next run takes the interpreter the previous one attacked")
	require.Equal(t, 0, exit.Code, got)
	assert.NotContains(t, got, "FORGED")
	// The same surroundings as an interpreter nobody attacked, but for
	// the marker that kept that one from the pool.
	assert.Equal(t, strings.Replace(cold, `, ["EXECUTE_CODE_OTHER", "1"]`, "", 1), got)
}

// The run's limits hold on a warm interpreter as on any other: set on
// its pid at the take, before its program runs.
func TestLimitsHoldOnAWarmInterpreter(t *testing.T) {
	sp := newSpawner(t)
	for name, tc := range map[string]struct {
		script string
		lim    Limits
		want   string
	}{
		"cpu":    {"while True:\n    pass\n", Limits{CPUSeconds: 1}, KilledByCPULimit},
		"memory": {"x = bytearray(1 << 30)\n", Limits{MemoryMB: 256}, KilledByMemoryLimit},
	} {
		cmd := Command{Path: proctest.Python(t), Main: mainFile(t, tc.script), Dir: t.TempDir(), Limits: tc.lim}
		pids := keepWarm(t, sp, 1, 0, cmd)
		pid, out, exit := run(t, sp, cmd)
		require.Equal(t, pids[0], pid, name)
		exc := ""
		if strings.Contains(out, "MemoryError") {
			exc = "MemoryError"
		}
		assert.Equal(t, tc.want, KilledBy(exit, tc.lim, exc, 0), "%s: %+v %s", name, exit, out)
	}
}

// A launched interpreter's status line decides whether it is handed its
// run: whatever bytes it says, the host accepts only the sandbox's plan
// (or, unconfined, all zero), and refuses anything else with an error,
// one wrapping ErrSandbox for an interpreter to be confined.
func FuzzLaunchStatus(f *testing.F) {
	for _, s := range []string{"ok 0 0 0 0 0\n", "ok 7 1 1 1 1\n", "error no landlock\n", "fail chdir /x: gone\n",
		"ok 7 1 1 1\n", "ok 0 0 0 0 1\n", "ok 5 1 1 1 1\n", "\n", ""} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, sandboxed bool) {
		got, err := parseLaunchStatus(string(b), sandboxed)
		if err != nil {
			assert.Equal(t, Protections{}, got)
			if sandboxed && !strings.HasPrefix(string(b), "fail ") {
				assert.ErrorIs(t, err, ErrSandbox)
			}
			return
		}
		if sandboxed {
			assert.Equal(t, Planned(got.ABI), got)
			assert.GreaterOrEqual(t, got.ABI, MinLandlockABI)
		} else {
			assert.Equal(t, Protections{}, got)
		}
	})
}
