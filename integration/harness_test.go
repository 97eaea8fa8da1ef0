package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"

	"github.com/executecode/executecode/internal/proctest"
)

// markEnv tags every process a test starts, so leftovers can be found by
// their environment even after they left their process group.
const markEnv = "EXECUTE_CODE_TEST_MARK"

// env is one test's runtime and the directories it owns.
type env struct {
	t      *testing.T
	rt     *executecode.Runtime
	root   string // tool root and cwd
	tmp    string // TMPDIR of the private staging root
	mark   string
	notify []string
}

type envOption func(*config.Config, *[]executecode.Option)

func withConfig(f func(*config.Config)) envOption {
	return func(c *config.Config, _ *[]executecode.Option) { f(c) }
}

func withTools(ts map[string]tools.Tool) envOption {
	return func(_ *config.Config, o *[]executecode.Option) { *o = append(*o, executecode.WithTools(ts)) }
}

func withRuntimeOption(opt executecode.Option) envOption {
	return func(_ *config.Config, o *[]executecode.Option) { *o = append(*o, opt) }
}

// newEnv builds an enabled per-call runtime over a fresh tool root and a
// fresh staging TMPDIR, and registers the leak checks that close the test.
func newEnv(t *testing.T, files map[string]string, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, root: t.TempDir(), tmp: t.TempDir(), mark: randomMark()}
	t.Setenv(markEnv, e.mark)
	for name, body := range files {
		p := filepath.Join(e.root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	cfg := config.Defaults()
	cfg.Enabled = true
	// The test's own options come last, so they may replace these.
	rtOpts := []executecode.Option{executecode.WithRoot(e.root), executecode.WithTmpDir(e.tmp)}
	for _, o := range opts {
		o(&cfg, &rtOpts)
	}
	rt, err := executecode.New(cfg, rtOpts...)
	require.NoError(t, err)
	e.rt = rt
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, rt.Close(ctx))
		e.assertNoProcesses()
		e.assertNoWorkspaces()
	})
	return e
}

func randomMark() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run executes script and fails the test on a tool error.
func (e *env) run(script string, timeoutMS ...int) executecode.Result {
	e.t.Helper()
	res, err := e.exec(context.Background(), script, timeoutMS...)
	require.NoError(e.t, err)
	return res
}

func (e *env) exec(ctx context.Context, script string, timeoutMS ...int) (executecode.Result, error) {
	call := executecode.Call{Script: script, Notify: func(m string) { e.notify = append(e.notify, m) }}
	if len(timeoutMS) > 0 {
		call.TimeoutMS = timeoutMS[0]
	}
	return e.rt.Execute(ctx, call)
}

// assertNoProcesses fails if any process carrying this test's mark is
// still alive (zombies awaiting their reaper count as gone), but for a
// warm interpreter: another runtime of the test started it with the mark
// this env set, and the pool's own tests hold Close to ending them.
func (e *env) assertNoProcesses() {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := slices.DeleteFunc(proctest.Marked(markEnv, e.mark), proctest.Warm)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("processes left behind: %v", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scriptProcesses is markedProcesses without the runtime's own guard
// process and warm interpreters, which live as long as the runtime: while
// a runtime is open, these are what its scripts and kernels left.
func scriptProcesses(mark string) []int {
	var pids []int
	for _, pid := range proctest.Marked(markEnv, mark) {
		argv, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if !bytes.HasPrefix(argv, []byte(guardArgv0+"\x00")) && !proctest.Warm(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// warmGoroutines are those of a warm interpreter the runtime keeps while
// it is open (internal/proc's pool): its start, its waiter and the drains
// of its start-up pipes.
var warmGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/executecode/executecode/internal/proc.(*pool).fill"),
	goleak.IgnoreAnyFunction("github.com/executecode/executecode/internal/proc.(*interp).awaitReady"),
	goleak.IgnoreAnyFunction("github.com/executecode/executecode/internal/proc.(*Process).wait"),
	goleak.IgnoreAnyFunction("github.com/executecode/executecode/internal/proc.copyOutput"),
}

// guardArgv0 is the guard's argv[0] (kernelworker's guard.go).
const guardArgv0 = "execute-code-guard"

// assertNoWorkspaces fails if a per-call workspace or cell bridge is left
// under the staging TMPDIR.
func (e *env) assertNoWorkspaces() {
	e.t.Helper()
	_ = filepath.WalkDir(e.tmp, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.HasPrefix(d.Name(), "exec-code") {
			e.t.Errorf("workspace left behind: %s", strings.TrimPrefix(p, e.tmp))
		}
		return nil
	})
}

// stagingRoot returns the one private root under the test's TMPDIR.
func (e *env) stagingRoot() string {
	e.t.Helper()
	m, _ := filepath.Glob(filepath.Join(e.tmp, "execute-code-private-*"))
	require.Len(e.t, m, 1)
	return m[0]
}

// stoppedByCtx: the caller's ctx ended a run that started; its Result
// still says what ran.
func stoppedByCtx(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// requireRan fails unless err is nil or the caller's ctx ended the run.
func requireRan(t *testing.T, err error) {
	t.Helper()
	if !stoppedByCtx(err) {
		require.NoError(t, err)
	}
}
