package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
)

// waitingApprover records each prompt and never answers: the prompt ends
// only by cancellation, timeout or ResolveApproval.
type waitingApprover struct {
	mu    sync.Mutex
	ids   []string
	asked atomic.Int64
}

func (w *waitingApprover) Decide(ctx context.Context, req approval.Request) (approval.Decision, error) {
	w.mu.Lock()
	w.ids = append(w.ids, req.ID)
	w.mu.Unlock()
	w.asked.Add(1)
	<-ctx.Done()
	return approval.Deny, ctx.Err()
}

func (w *waitingApprover) lastID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ids) == 0 {
		return ""
	}
	return w.ids[len(w.ids)-1]
}

func gated(c *config.Config) { c.RequireApproval = []string{"read"} }

// A script that times out while its helper call waits on a prompt leaves
// no prompt behind, and a late approval installs nothing.
func TestScriptTimeoutCancelsItsPendingPrompt(t *testing.T) {
	w := &waitingApprover{}
	e := newEnv(t, map[string]string{"a.txt": "a"}, withConfig(gated), withRuntimeOption(executecode.WithApprover(w)))
	// The timeout leaves python time to reach its call on a slow machine.
	res := e.run("read('a.txt')\n", 5000)
	assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy)
	id := w.lastID()
	require.NotEmpty(t, id)
	assert.ErrorIs(t, e.rt.ResolveApproval(id, approval.ApproveGlobal), approval.ErrNotPending)

	// Nothing was installed: the next call prompts again (and is denied,
	// so the run ends without waiting out a timeout).
	before := w.asked.Load()
	done := make(chan error, 1)
	go func() {
		_, err := e.exec(context.Background(), "read('a.txt')\n", 60000)
		done <- err
	}()
	require.Eventually(t, func() bool { return w.asked.Load() == before+1 }, 30*time.Second, 10*time.Millisecond,
		"the next call prompts again")
	require.NoError(t, e.rt.ResolveApproval(w.lastID(), approval.Deny))
	require.NoError(t, <-done)
	assert.Equal(t, before+1, w.asked.Load())
}

func TestResolvedApprovalLetsTheCallRunAndSessionScopeSticks(t *testing.T) {
	w := &waitingApprover{}
	e := sessionEnv(t, map[string]string{"a.txt": "alpha"}, withConfig(gated), withRuntimeOption(executecode.WithApprover(w)))
	o := e.attach("s1")
	go func() {
		for w.lastID() == "" {
			time.Sleep(10 * time.Millisecond)
		}
		_ = e.rt.ResolveApproval(w.lastID(), approval.ApproveSession)
	}()
	res := e.cell(o, "text(read('a.txt'))")
	require.Len(t, res.Blocks, 1)
	assert.Contains(t, res.Blocks[0], "alpha")
	// approve_session answers the same call in this session without a prompt.
	again := e.cell(o, "text(read('a.txt'))")
	assert.Contains(t, again.Blocks[0], "alpha")
	assert.Equal(t, int64(1), w.asked.Load())
}

// Detaching the owner while its cell waits on a prompt cancels the prompt.
func TestOwnerDetachCancelsThePendingPrompt(t *testing.T) {
	w := &waitingApprover{}
	e := sessionEnv(t, map[string]string{"a.txt": "a"}, withConfig(gated), withRuntimeOption(executecode.WithApprover(w)))
	o := e.attach("s1")
	done := make(chan executecode.Result, 1)
	go func() {
		res, _ := e.cellErr(context.Background(), o, "read('a.txt')\n", false)
		done <- res
	}()
	require.Eventually(t, func() bool { return w.lastID() != "" }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, o.Detach(context.Background()))
	res := <-done
	assert.False(t, boolp(res.Details.StateRetained))
	assert.ErrorIs(t, e.rt.ResolveApproval(w.lastID(), approval.ApproveGlobal), approval.ErrNotPending)
}

func TestWithoutAnApproverGatedCallsAreDenied(t *testing.T) {
	e := newEnv(t, map[string]string{"a.txt": "a"}, withConfig(gated))
	res := e.run("try:\n    read('a.txt')\nexcept ToolError as e:\n    text(str(e))\n")
	assert.Equal(t, []string{"approval denied for 'read'"}, res.Blocks)
	assert.Equal(t, 1, res.Details.RPCDenied)
}
