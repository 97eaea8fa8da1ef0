package kernelworker

import (
	"sync/atomic"
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

// attachableView is what the registry asks of a status before it hands a
// kernel out again.
func attachableView(st *Status) bool {
	if st == nil || !st.ProcessAlive {
		return false
	}
	switch st.Phase {
	case PhaseStarting, PhaseIdle, PhaseRunning:
		return true
	}
	return false
}

// The view says what a StatusRequest answers once the worker has handled
// what it was sent.
func TestStatusViewFollowsTheWorker(t *testing.T) {
	h := newKernelHarness(t)
	handle := h.startHandle()
	res := h.run(handle.PID, "x = 1")
	require.Empty(t, res.Reason)
	h.waitPhase(handle.PID, PhaseIdle)
	st := handle.Status.Load()
	require.NotNil(t, st)
	assert.Equal(t, *h.status(handle.PID), *st)
	assert.Equal(t, 1, st.CellsCompleted)
}

// A caller that got an answer losing the kernel must never find the
// kernel attachable afterwards: its next cell would be handed a kernel
// that is already ending, and be refused shutting_down instead of
// running on a new one. The check runs on the worker's own goroutine
// right after the answer went out (the cell.cancel a fault emits next),
// before the worker has changed its phase.
func TestStatusViewNeverOffersAKernelAfterTheAnswerThatEndedIt(t *testing.T) {
	var view atomic.Pointer[StatusView]
	var checked atomic.Bool
	var seen atomic.Pointer[Status]
	h := newKernelHarness(t, func(o *Options) {
		o.Runner = fakeRunner(t)
		o.Telemetry.Subscribe(immediate(func(e telemetry.Event) {
			if _, ok := e.(telemetry.CellCancel); ok && view.Load() != nil {
				seen.Store(view.Load().Load())
				checked.Store(true)
			}
		}))
	})
	handle := h.startHandle()
	view.Store(handle.Status)
	require.Empty(t, h.run(handle.PID, "pass").Reason)
	res := h.run(handle.PID, `raw(b"garbage\n")`+"\nimport time\ntime.sleep(600)")
	require.Equal(t, ReasonProtocolFault, res.Reason)
	// The worker emits the cancel right after the answer, on its own
	// goroutine, which may run after this one has the answer.
	require.Eventually(t, checked.Load, 10*time.Second, time.Millisecond, "no cell.cancel after the fault")
	assert.False(t, attachableView(seen.Load()), "view right after the answer: %+v", seen.Load())
	assert.False(t, attachableView(handle.Status.Load()), "view once the caller has the answer")
	h.waitGone(handle.PID)
	assert.False(t, attachableView(handle.Status.Load()), "view once the worker is gone")
}

type immediate func(telemetry.Event)

func (f immediate) Handle(e telemetry.Event) { f(e) }
func (immediate) Immediate()                 {}

// A timed-out cell is answered once its kernel is gone: the view says so.
func TestStatusViewAfterATimeout(t *testing.T) {
	h := newKernelHarness(t)
	handle := h.startHandle()
	res := h.run(handle.PID, "import time\ntime.sleep(60)", withTimeout(300*time.Millisecond))
	require.Equal(t, ReasonTimeout, res.Reason)
	assert.False(t, attachableView(handle.Status.Load()))
}
