package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// Hostile content a script plants in the tool root before calling the
// helpers: special files where the tools expect regular ones, an ignore
// file of a million lines, a file that is one endless line. Every helper
// call is answered, the run ends by its deadline, and no goroutine or
// descriptor of a tool outlives the call.

// attempt is a python helper that turns a ToolError into text, so one
// script can show every answer.
const attempt = `
def attempt(f, **kw):
    try:
        return "ok: " + f(**kw)
    except ToolError as e:
        return "error: " + str(e)
`

// runFunc runs a script in one call mode; ctx is the caller's.
type runFunc func(ctx context.Context, script string, timeoutMS int) executecode.Result

// toolsModes runs body once per call mode, with a way to run a script in
// that mode and the host's descriptor count measured after a warm-up run
// (which starts the guard, and in session mode the kernel).
func toolsModes(t *testing.T, opts []envOption, body func(t *testing.T, e *env, run runFunc)) {
	for _, mode := range []string{"per call", "session"} {
		t.Run(mode, func(t *testing.T) {
			// Registered first, so it runs last: after the runtime closed.
			before := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, before) })
			var e *env
			var run runFunc
			if mode == "session" {
				e = sessionEnv(t, nil, opts...)
				o := e.attach("s1")
				run = func(ctx context.Context, s string, ms int) executecode.Result {
					res, err := e.cellErr(ctx, o, s, false, ms)
					requireRan(t, err)
					return res
				}
			} else {
				e = newEnv(t, nil, opts...)
				run = func(ctx context.Context, s string, ms int) executecode.Result {
					res, err := e.exec(ctx, s, ms)
					requireRan(t, err)
					return res
				}
			}
			require.Equal(t, []string{"warm"}, run(context.Background(), "text('warm')", 10000).Blocks)
			fds := countFDs(t)
			body(t, e, run)
			// Fewer is fine: a timed-out cell takes its kernel's pipes along.
			// The runtime removes an ended cell's bridge after the call
			// returns, which holds a directory open for a moment.
			assert.Eventually(t, func() bool { return countFDs(t) <= fds }, 5*time.Second, 5*time.Millisecond,
				"no descriptor outlives its helper call: %d, %d before", countFDs(t), fds)
		})
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// A FIFO planted as .gitignore, and a FIFO passed to read, grep and find:
// nothing blocks, each call says what the FIFO is, and the calls after
// them in the same run are answered.
func TestPlantedFIFOsNeverBlockTheHelpers(t *testing.T) {
	script := attempt + `
import os
os.mkfifo(".gitignore")
os.mkfifo("pipe")
with open("a.txt", "w") as f:
    f.write("needle\n")
text(attempt(grep, pattern="needle"))
text(attempt(read, path="pipe"))
text(attempt(grep, pattern="needle", path="pipe"))
text(attempt(find, pattern="*", path="pipe"))
text(attempt(find, pattern="*.txt"))
text(attempt(read, path="a.txt"))
os.unlink(".gitignore")
os.unlink("pipe")
`
	toolsModes(t, nil, func(t *testing.T, e *env, run runFunc) {
		start := time.Now()
		res := run(context.Background(), script, 20000)
		t.Logf("answered in %s", time.Since(start).Round(time.Millisecond))
		skipped := "[.gitignore skipped: a named pipe (FIFO), not a regular file]"
		assert.Equal(t, []string{
			"ok: a.txt:1:needle\n" + skipped,
			"error: pipe is a named pipe (FIFO), not a regular file",
			"error: pipe is a named pipe (FIFO), not a regular file",
			"error: pipe is not a directory; find searches below a directory",
			"ok: a.txt\n" + skipped,
			"ok:      1\tneedle",
		}, res.Blocks, res.Text())
		assert.Empty(t, res.Details.KilledBy)
		assert.Equal(t, 6, res.Details.RPCCalls)
	})
}

// The reproduction: a million-line .gitignore, then grep. The
// file is skipped unread with a note naming it, and the run goes on. (The
// glob keeps grep from searching the 24 MB file itself, which the race
// detector makes slow.)
func TestMillionLineGitignoreIsSkippedAndTheRunGoesOn(t *testing.T) {
	script := `
import os
with open(".gitignore", "w") as f:
    for i in range(10**6):
        f.write(f"dir{i}/file{i}.txt\n")
with open("a.txt", "w") as f:
    f.write("needle\n")
text(str(os.path.getsize(".gitignore")))
text(grep("needle", glob="*.txt"))
text(read("a.txt"))
os.unlink(".gitignore")
`
	toolsModes(t, nil, func(t *testing.T, e *env, run runFunc) {
		res := run(context.Background(), script, 60000)
		require.Len(t, res.Blocks, 3, res.Text())
		assert.Equal(t, "a.txt:1:needle\n[.gitignore skipped: "+res.Blocks[0]+" bytes, over the 1 MiB limit for ignore files]", res.Blocks[1])
		assert.Equal(t, "     1\tneedle", res.Blocks[2])
	})
}

// One line of 16 GiB (a sparse file: planted in a millisecond, read at
// memory speed for many seconds) keeps grep busy past the run's end
// unless the tool stops there: the run ends by its deadline, or at the
// caller's cancel, and the tool's goroutine is gone as soon as the call
// returns.
func TestToolStopsAtTheRunsDeadlineAndCancel(t *testing.T) {
	script := `
import os
with open("endless.txt", "w") as f:
    f.write("a" * 9000)
    f.truncate(16 << 30)
text("planted")
grep("needle")
text("never")
`
	// Without a file size limit, so one file can be that large.
	noFsize := withConfig(func(c *config.Config) { c.FsizeLimitMB = 0 })
	toolsModes(t, []envOption{noFsize}, func(t *testing.T, e *env, run runFunc) {
		const timeout = 2000
		for _, how := range []string{"timeout", "cancelled"} {
			ctx, cancel := context.WithCancel(context.Background())
			ms := timeout
			if how == "cancelled" {
				ms = 60000
				time.AfterFunc(timeout*time.Millisecond, cancel)
			}
			before := goleak.IgnoreCurrent()
			start := time.Now()
			res := run(ctx, script, ms)
			elapsed := time.Since(start)
			cancel()
			assert.Equal(t, []string{"planted"}, res.Blocks)
			assert.Equal(t, how, string(res.Details.KilledBy))
			assert.Less(t, elapsed, timeout*time.Millisecond+5*time.Second, "the run ends by its deadline or cancel")
			// The helper's goroutine ended with its context; the warm
			// interpreter the run's replacement started is the runtime's.
			goleak.VerifyNone(t, append(warmGoroutines, before)...)
			t.Logf("%s: run returned %s after it started (%d ms)", how, elapsed.Round(time.Millisecond), timeout)
		}
		require.NoError(t, os.Remove(e.root+"/endless.txt"))
	})
}
