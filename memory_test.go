package executecode_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// Every actor, future and status query a session call makes is removed
// from the actor system when it ends, whatever way the call ended: the
// registered processes of a quiet runtime are those it started with.
func TestSessionCallsLeaveNoProcessRegistered(t *testing.T) {
	r := newRig(t)
	quiet := func() int {
		r.waitSnapshot(func(s executecode.Snapshot) bool {
			return s.Capacity.Live == 0 && s.Phases["unreachable"] == 0 && s.InflightCells == 0 && s.Owners == 0
		}, "every kernel stopped")
		return executecode.RegisteredProcesses(r.rt)
	}
	first := r.attach("warm")
	r.run(first, "x = 1")
	require.NoError(t, first.Detach(context.Background()))
	base := quiet()
	require.Positive(t, base)

	for range 3 {
		o, err := r.rt.Attach(context.Background(), executecode.Scope{SessionID: "cycle", AgentID: "main"})
		require.NoError(t, err)
		r.run(o, "x = 1")
		require.NoError(t, o.Detach(context.Background()))
	}
	o := r.attach("cells")
	for _, script := range []string{"x = 1", "raise ValueError('x')", "import os\nos._exit(3)", "x = 2"} {
		r.run(o, script)
	}
	res := r.run(o, "import time\ntime.sleep(30)", 1000)
	assert.Equal(t, executecode.KilledByTimeout, res.Details.KilledBy, res.Text())
	// The timed-out cell's kernel is gone with its result: a new one is
	// there to be reset.
	r.run(o, "x = 4")
	res, err := r.rt.Execute(context.Background(), executecode.Call{Script: "x = 3", Owner: o, Reset: true})
	require.NoError(t, err)
	assert.True(t, res.Details.ResetPerformed, res.Text())
	r.snapshot()
	require.NoError(t, o.Detach(context.Background()))

	assert.Equal(t, base, quiet(), "processes registered after the calls ended")
}
