package executecode_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// goCell runs script as o's call in a goroutine; queued is closed once the
// cell has its place in the kernel's FIFO.
func (r *rig) goCell(o *executecode.Owner, script string) (result <-chan executecode.Result, queued <-chan struct{}) {
	res, q := make(chan executecode.Result, 1), make(chan struct{})
	var once bool
	go func() {
		out, err := r.rt.Execute(context.Background(), executecode.Call{Script: script, Owner: o, Queued: func() {
			if !once {
				once = true
				close(q)
			}
		}})
		assert.NoError(r.t, err)
		res <- out
	}()
	return res, q
}

func waitResult(t *testing.T, ch <-chan executecode.Result) executecode.Result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(waitFor):
		t.Fatal("no result")
		return executecode.Result{}
	}
}

// waitFile waits until the script under test created path.
func waitFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, waitFor, 5*time.Millisecond)
}

func assertOwnerGone(t *testing.T, res executecode.Result, text string, retained bool) {
	t.Helper()
	require.NotNil(t, res.Details)
	assert.Equal(t, text, res.Text())
	assert.Equal(t, executecode.ReasonOwnerGone, res.Details.Reason)
	assert.Equal(t, executecode.KilledByOwnerGone, res.Details.KilledBy)
	assert.Nil(t, res.Details.ExitCode)
	require.NotNil(t, res.Details.StateRetained)
	assert.Equal(t, retained, *res.Details.StateRetained)
}

// Detaching the only owner under its running cell and the cell queued
// behind it stops the kernel: both read as the detach, and both say the
// state is gone.
func TestDetachUnderARunningAndAQueuedCellSaysOwnerGone(t *testing.T) {
	r := newRig(t)
	o := r.attach("s")
	r.run(o, "x = 1")
	started := filepath.Join(r.root, "started")
	running, q1 := r.goCell(o, "import time\nopen('started', 'w').close()\ntime.sleep(30)")
	<-q1
	waitFile(t, started)
	queued, q2 := r.goCell(o, "open('queued-ran', 'w').close()")
	<-q2
	require.NoError(t, o.Detach(context.Background()))

	assertOwnerGone(t, waitResult(t, running), "Script cancelled: its session was detached. "+executecode.StateDiscardedLine, false)
	assertOwnerGone(t, waitResult(t, queued), "Script did not run: its session was detached. "+executecode.StateDiscardedLine, false)
	_, err := os.Stat(filepath.Join(r.root, "queued-ran"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the queued cell never ran")
}

// A co-owner that detaches while its cell waits behind the other owner's
// takes only its own cell out of the queue: the kernel and its state stay.
func TestACoOwnersDetachTakesItsQueuedCellOutAndKeepsTheState(t *testing.T) {
	r := newRig(t)
	a, b := r.attach("s"), r.coAttach("s")
	r.run(a, "x = 1")
	running, q1 := r.goCell(a, "import time\ntime.sleep(1)\nx += 1")
	<-q1
	queued, q2 := r.goCell(b, "open('queued-ran', 'w').close()")
	<-q2
	require.NoError(t, b.Detach(context.Background()))

	assertOwnerGone(t, waitResult(t, queued), "Script did not run: its session was detached. Nothing ran; the session's state is kept.", true)
	first := waitResult(t, running)
	assert.Empty(t, first.Details.Reason, first.Text())
	assert.Equal(t, "2\n", r.run(a, "print(x)").Text())
	_, err := os.Stat(filepath.Join(r.root, "queued-ran"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the queued cell never ran")
}

// A caller that cancels its running cell loses the state and is told so;
// one that cancels a queued cell loses nothing, and is told that too.
func TestCancelledCellsSayWhatHappenedToTheState(t *testing.T) {
	r := newRig(t)
	o := r.attach("s")
	r.run(o, "x = 1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan executecode.Result, 1)
	go func() {
		res, err := r.rt.Execute(ctx, executecode.Call{Script: "import time\nopen('started', 'w').close()\ntime.sleep(30)", Owner: o})
		assert.ErrorIs(t, err, context.Canceled)
		running <- res
	}()
	waitFile(t, filepath.Join(r.root, "started"))
	cancel()
	res := waitResult(t, running)
	assert.Equal(t, "Script cancelled. "+executecode.StateDiscardedLine, res.Text())
	assert.Equal(t, executecode.ReasonCancelled, res.Details.Reason)
	assert.Equal(t, executecode.KilledByCancelled, res.Details.KilledBy)
	assert.Nil(t, res.Details.ExitCode)
	assert.False(t, *res.Details.StateRetained)

	r.run(o, "y = 1")
	blocker, q1 := r.goCell(o, "import time\ntime.sleep(1)\ny += 1")
	<-q1
	qctx, qcancel := context.WithCancel(context.Background())
	queued := make(chan executecode.Result, 1)
	q2 := make(chan struct{})
	go func() {
		res, err := r.rt.Execute(qctx, executecode.Call{Script: "open('queued-ran', 'w').close()", Owner: o, Queued: func() { close(q2) }})
		assert.ErrorIs(t, err, context.Canceled)
		queued <- res
	}()
	<-q2
	qcancel()
	res = waitResult(t, queued)
	assert.Equal(t, "Script cancelled before it started. Nothing ran; the session's state is kept.", res.Text())
	assert.Equal(t, executecode.ReasonCancelled, res.Details.Reason)
	assert.True(t, *res.Details.StateRetained)
	assert.Empty(t, waitResult(t, blocker).Details.Reason)
	assert.Equal(t, "2\n", r.run(o, "print(y)").Text())
	assert.NoFileExists(t, filepath.Join(r.root, "queued-ran"))
}

// A session call whose kernel key cannot be built (the tool root is gone)
// does not run, and does not run isolated either: the result says so, and
// the session's state is untouched.
func TestSessionCallWithAnInvalidKernelKeyDoesNotRun(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	require.NoError(t, os.Mkdir(root, 0o700))
	r := newRig(t, withRoot(root))
	o := r.attach("s1")
	require.NoError(t, os.Remove(root))

	res := r.run(o, "text('never')")
	require.NotNil(t, res.Details)
	assert.Equal(t, executecode.ReasonInvalidSessionKey, res.Details.Reason)
	assert.Regexp(t, `^Script did not run: the session's kernel key is invalid \(.+\)\. `+
		regexp.QuoteMeta("Nothing ran; the session's state is kept.")+`$`, res.Text())
	assert.Nil(t, res.Details.ExitCode)
	assert.True(t, res.Details.Persistent)
	require.NotNil(t, res.Details.StateRetained)
	require.NotNil(t, res.Details.KernelReused)
	assert.True(t, *res.Details.StateRetained)
	assert.False(t, *res.Details.KernelReused)
	assert.Empty(t, res.Details.FallbackReason)
	assert.Empty(t, res.Blocks)
	assert.Empty(t, r.trace(), "no kernel started, no fallback ran")
}
