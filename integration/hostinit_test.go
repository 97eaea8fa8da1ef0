package integration

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// initLine is what the embedding host's early init prints.
const initLine = "hostinit: init ran"

// buildHostInit builds testdata/hostinit, a host whose module path
// (example.com/...) sorts before the runtime's, so its dependency's init
// runs before any of the runtime's package initialisers.
func buildHostInit(t *testing.T) string {
	t.Helper()
	return buildTestModule(t, "hostinit")
}

// buildTestModule builds testdata/<name>, a module of its own that
// requires the runtime (replaced by this repo), and returns the binary;
// edits are further `go mod edit` flags applied to its go.mod first.
// The build is offline: the module starts from the repo's go.sum, so
// every module it needs must be one the repo's own build list holds,
// which is what `go mod download` fetches on a fresh machine.
func buildTestModule(t *testing.T, name string, edits ...string) string {
	t.Helper()
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	src := t.TempDir()
	from := filepath.Join("testdata", name)
	require.NoError(t, filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(src, rel), b, 0o644)
	}))
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.sum"), sum, 0o644))
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	edit := exec.Command(goBin, append([]string{"mod", "edit", "-replace", "github.com/executecode/executecode=" + repo}, edits...)...)
	edit.Dir, edit.Env = src, env
	out, err := edit.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir, build.Env = src, env
	out, err = build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// hostInitRun starts the host in mode with a fresh root and TMPDIR, and
// returns it, the file its init appends pids to, its TMPDIR and mark
// (NUL-separated), and its stdout lines. Its stderr must show the init's
// line exactly once, from the host itself.
func hostInitRun(t *testing.T, bin, mode string) (*exec.Cmd, string, string, <-chan string) {
	t.Helper()
	mark := randomMark()
	tmp, pids := t.TempDir(), filepath.Join(t.TempDir(), "pids")
	host := exec.Command(bin, mode, t.TempDir())
	host.Env = append(os.Environ(), "TMPDIR="+tmp, "HOSTINIT_PIDS="+pids, markEnv+"="+mark)
	stdout, err := host.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	host.Stderr = &stderr
	require.NoError(t, host.Start())
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
		assert.Equal(t, 1, strings.Count(stderr.String(), initLine), "host stderr: %s", stderr.String())
		assert.Empty(t, proctest.WaitGone(proctest.Marked(markEnv, mark), 5*time.Second), "no process of the host may outlive the test")
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		for range lines {
		}
	})
	return host, pids, tmp + "\x00" + mark, lines
}

func nextLine(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the host ended before printing %q", prefix)
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest
			}
		case <-timeout:
			t.Fatalf("the host never printed %q", prefix)
		}
	}
}

func initPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

// No process the runtime starts (interpreters, kernels, the guard) runs
// any of the host binary's code: an embedding application's init runs
// once, in the host, and never prints into a script's diagnostics, through
// a per-call run, a session cell, the guard's start and its clean stop, or
// a guard that outlives its killed host.
func TestNoHostCodeRunsInSpawnedProcesses(t *testing.T) {
	bin := buildHostInit(t)

	t.Run("clean close", func(t *testing.T) {
		host, pids, _, lines := hostInitRun(t, bin, "run")
		results := nextLine(t, lines, "results ")
		require.NoError(t, host.Wait())
		assert.NotContains(t, results, initLine, "diagnostics must not carry the host's init output")
		assert.NotContains(t, results, "fallback_reason", "the kernel must start and run the cell")
		assert.Contains(t, results, `"blocks":["x"]`)
		assert.Contains(t, results, `"blocks":["y"]`)
		assert.Equal(t, []int{host.Process.Pid}, initPids(t, pids))
	})

	t.Run("killed host", func(t *testing.T) {
		host, pids, tmpMark, lines := hostInitRun(t, bin, "die")
		tmp, mark, _ := strings.Cut(tmpMark, "\x00")
		results := nextLine(t, lines, "results ")
		nextLine(t, lines, "ready")
		assert.NotContains(t, results, initLine)
		require.NoError(t, host.Process.Signal(syscall.SIGKILL))
		_ = host.Wait()
		// The guard outlives the host by design, until its work is done.
		assert.Empty(t, proctest.WaitGone(proctest.Marked(markEnv, mark), 10*time.Second))
		roots, err := filepath.Glob(filepath.Join(tmp, "execute-code-private-*"))
		require.NoError(t, err)
		assert.Empty(t, roots, "the guard removes the dead host's staging root")
		assert.Equal(t, []int{host.Process.Pid}, initPids(t, pids))
	})
}
