package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

func sessionEnv(t *testing.T, files map[string]string, opts ...envOption) *env {
	opts = append([]envOption{withConfig(func(c *config.Config) { c.KernelMode = config.Session })}, opts...)
	return newEnv(t, files, opts...)
}

func (e *env) attach(session string) *executecode.Owner {
	e.t.Helper()
	o, err := e.rt.Attach(context.Background(), executecode.Scope{SessionID: session, AgentID: "main"})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = o.Detach(context.Background()) })
	return o
}

// coAttach makes a co-owner of session's kernels.
func (e *env) coAttach(session string) *executecode.Owner {
	e.t.Helper()
	o, err := e.rt.AttachCoOwner(context.Background(), executecode.Scope{SessionID: session, AgentID: "main"})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = o.Detach(context.Background()) })
	return o
}

func (e *env) cell(o *executecode.Owner, script string, timeoutMS ...int) executecode.Result {
	e.t.Helper()
	res, err := e.cellErr(context.Background(), o, script, false, timeoutMS...)
	require.NoError(e.t, err)
	return res
}

func (e *env) cellErr(ctx context.Context, o *executecode.Owner, script string, reset bool, timeoutMS ...int) (executecode.Result, error) {
	call := executecode.Call{Script: script, Owner: o, Reset: reset, Notify: func(m string) { e.notify = append(e.notify, m) }}
	if len(timeoutMS) > 0 {
		call.TimeoutMS = timeoutMS[0]
	}
	return e.rt.Execute(ctx, call)
}

func boolp(b *bool) bool { return b != nil && *b }

func TestSessionStateSurvivesAcrossCells(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("s1")
	first := e.cell(o, "import math\ncounter = 41\ntext('set')\n")
	assert.Equal(t, []string{"set"}, first.Blocks)
	assert.True(t, first.Details.Persistent)
	assert.True(t, boolp(first.Details.StateRetained))
	assert.False(t, boolp(first.Details.KernelReused))

	second := e.cell(o, "counter += 1\ntext(f'{counter} {math.pi:.2f}')\n")
	assert.Equal(t, []string{"42 3.14"}, second.Blocks)
	assert.True(t, boolp(second.Details.KernelReused))
	assert.Empty(t, second.Details.Reason)
}

func TestSessionExceptionKeepsStateAndShowsFilteredTraceback(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("s1")
	res := e.cell(o, "items = [1, 2]\nitems.append(3)\nraise ValueError('boom after mutation')\n")
	assert.Equal(t, executecode.ReasonException, res.Details.Reason)
	assert.True(t, boolp(res.Details.StateRetained))
	text := res.Text()
	require.NotNil(t, res.Details.ExitCode)
	assert.Equal(t, 1, *res.Details.ExitCode, "the code a fresh python3 exits with")
	assert.True(t, strings.HasPrefix(text, "Script raised ValueError: boom after mutation (exit code 1)\n\n"), text)
	assert.Contains(t, text, "line 4")
	assert.Contains(t, text, "raise ValueError('boom after mutation')")
	assert.NotContains(t, text, "runner.py", "runner frames are filtered out")
	assert.Equal(t, []string{"[1, 2, 3]"}, e.cell(o, "text(str(items))").Blocks)
}

func TestSessionTimeoutDiscardsTheKernel(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("s1")
	e.cell(o, "value = 'kept?'")
	res := e.cell(o, "import time\nprint('before sleep', flush=True)\ntime.sleep(30)\n", 1500)
	assert.False(t, boolp(res.Details.StateRetained))
	assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
	assert.True(t, strings.HasPrefix(res.Text(), "Script timed out after 1500ms. "+executecode.StateDiscardedLine), res.Text())
	gone := e.cell(o, "try:\n    value\n    text('survived')\nexcept NameError:\n    text('gone')\n")
	assert.Equal(t, []string{"gone"}, gone.Blocks)
	assert.False(t, boolp(gone.Details.KernelReused))
}

func TestSessionResetDiscardsStateFirst(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("s1")
	e.cell(o, "x = 1")
	res, err := e.cellErr(context.Background(), o, "text(str('x' in globals()))", true)
	require.NoError(t, err)
	assert.Equal(t, []string{"False"}, res.Blocks)
	assert.True(t, res.Details.ResetPerformed)
}

func TestSessionHelpersUseAFreshBridgePerCell(t *testing.T) {
	e := sessionEnv(t, map[string]string{"a.txt": "alpha\n"})
	o := e.attach("s1")
	one := e.cell(o, "text(read('a.txt'))\nnotify('n1')\n")
	assert.Contains(t, one.Blocks[0], "alpha")
	assert.Equal(t, 1, one.Details.RPCCalls)
	two := e.cell(o, "text('again')\n")
	assert.Equal(t, []string{"again"}, two.Blocks)
	assert.Equal(t, 0, two.Details.RPCCalls)
	assert.Equal(t, []string{"n1"}, e.notify)
}

func TestSessionWithoutOwnerRunsIsolated(t *testing.T) {
	e := sessionEnv(t, nil)
	res := e.cell(nil, "text('alone')")
	assert.Equal(t, executecode.FallbackMissingScope, res.Details.FallbackReason)
	assert.True(t, strings.HasPrefix(res.Text(), "Ran isolated in a fresh process (missing_session_scope)"))
}

func TestSeparateSessionsHaveSeparateKernels(t *testing.T) {
	e := sessionEnv(t, nil)
	a, b := e.attach("a"), e.attach("b")
	e.cell(a, "who = 'a'")
	res := e.cell(b, "text(str('who' in globals()))")
	assert.Equal(t, []string{"False"}, res.Blocks)
}

func TestCoOwnerResetForksOnlyTheRequester(t *testing.T) {
	e := sessionEnv(t, nil)
	a, b := e.attach("shared"), e.coAttach("shared")
	e.cell(a, "shared = 'yes'")
	assert.Equal(t, []string{"True"}, e.cell(b, "text(str('shared' in globals()))").Blocks, "co-owners share one kernel")
	res, err := e.cellErr(context.Background(), b, "text(str('shared' in globals()))", true)
	require.NoError(t, err)
	assert.Equal(t, []string{"False"}, res.Blocks, "the requester is forked onto a fresh kernel")
	assert.Equal(t, []string{"True"}, e.cell(a, "text(str('shared' in globals()))").Blocks, "the sibling keeps the shared kernel")
}

func TestDetachingTheOwnerOfTheActiveCellDiscardsTheKernel(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("s1")
	e.cell(o, "x = 1")
	var wg sync.WaitGroup
	var res executecode.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, _ = e.cellErr(context.Background(), o, "import time\ntime.sleep(30)\n", false)
	}()
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, o.Detach(context.Background()))
	wg.Wait()
	assert.False(t, boolp(res.Details.StateRetained))
	assert.NotEmpty(t, res.Details.Reason)
}

func TestCapacityEvictsTheLeastRecentlyUsedIdleKernel(t *testing.T) {
	e := sessionEnv(t, nil, withConfig(func(c *config.Config) { c.MaxLiveKernels = 2 }))
	a, b, c := e.attach("a"), e.attach("b"), e.attach("c")
	e.cell(a, "x = 'a'")
	e.cell(b, "x = 'b'")
	res := e.cell(c, "x = 'c'\ntext('c ran')")
	assert.True(t, res.Details.Persistent, "admission evicted an idle kernel instead of falling back")
	gone := e.cell(a, "text(str('x' in globals()))")
	assert.Equal(t, []string{"False"}, gone.Blocks, "a was the least recently used")
}

func TestCapacityExhaustedFallsBackWhenNothingIsIdle(t *testing.T) {
	e := sessionEnv(t, nil, withConfig(func(c *config.Config) { c.MaxLiveKernels = 1 }))
	a, b := e.attach("a"), e.attach("b")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.cellErr(context.Background(), a, "import time\ntime.sleep(3)\n", false)
	}()
	time.Sleep(700 * time.Millisecond)
	res := e.cell(b, "text('isolated')")
	assert.Equal(t, executecode.FallbackCapacityExhausted, res.Details.FallbackReason)
	assert.Equal(t, []string{"isolated"}, res.Blocks)
	<-done
}

func TestSnapshotCountsLiveKernels(t *testing.T) {
	e := sessionEnv(t, nil)
	snap, err := e.rt.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, snap.Capacity.Live)
	o := e.attach("s1")
	e.cell(o, "x = 1")
	snap, err = e.rt.Snapshot(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, snap.Capacity.Live)
	assert.Equal(t, 1, snap.Phases["idle"])
	assert.Equal(t, 1, snap.Owners)
}

// Owner departure (docs/architecture.md): a departing co-owner loses only
// its queued cell; the kernel and the other owner's running cell are
// untouched.
func TestDepartingCoOwnerLosesOnlyItsQueuedCell(t *testing.T) {
	e := sessionEnv(t, nil)
	a, b := e.attach("shared"), e.coAttach("shared")
	e.cell(a, "kept = 'yes'")
	running := make(chan executecode.Result, 1)
	go func() { running <- e.cell(a, "import time\ntime.sleep(1.5)\ntext('a finished')\n") }()
	time.Sleep(400 * time.Millisecond)
	queued := make(chan executecode.Result, 1)
	go func() {
		res, _ := e.cellErr(context.Background(), b, "text('b ran')", false)
		queued <- res
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, b.Detach(context.Background()))

	bRes := <-queued
	assert.Empty(t, bRes.Blocks, "the queued cell never ran")
	assert.Equal(t, executecode.KilledByOwnerGone, bRes.Details.KilledBy)
	aRes := <-running
	assert.Equal(t, []string{"a finished"}, aRes.Blocks)
	assert.Equal(t, []string{"yes"}, e.cell(a, "text(kept)").Blocks, "the kernel kept its state")
}
