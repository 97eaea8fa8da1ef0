package registry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/telemetry"
)

func TestIdleKernelIsReapedOnceItsIdleTimeoutHasPassed(t *testing.T) {
	h := newHarness(t)
	owner := h.newOwner()
	al := h.mustAcquire(h.key("s"), owner, withIdle(time.Minute))
	h.clock.Advance(10 * time.Minute) // leased: idleness counts from release
	require.NoError(t, h.release(al.Lease))

	h.clock.Advance(time.Minute - time.Second)
	h.reapOnce()
	assert.Empty(t, h.stopsOf(1), "not yet idle for a minute")

	h.clock.Advance(time.Second)
	h.reapOnce()
	h.waitStops(1, "idle_reaped")
	reaps := events[telemetry.SessionReap](h)
	require.Len(t, reaps, 1)
	assert.Equal(t, telemetry.ReapIdle, reaps[0].Reason)
	assert.Equal(t, time.Minute, reaps[0].Idle)
	assert.Equal(t, 0, reaps[0].LiveKernels)
	h.waitGone(al.Worker.PID())
	h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 1 }, "stop event")
	assert.Equal(t, telemetry.StopShutdown, events[telemetry.SessionStop](h)[0].Reason)
	assert.Equal(t, 0, h.snapshot().Live)
}

func TestLeasedOrBusyKernelsAreNeverReapedForIdleness(t *testing.T) {
	cases := map[string]struct {
		release bool
		shape   func(*fakeWorker)
	}{
		"leased idle kernel": {false, func(*fakeWorker) {}},
		"running kernel":     {true, func(w *fakeWorker) { w.phase, w.active = kernelworker.PhaseRunning, dummyCell("c1") }},
		"starting kernel":    {true, func(w *fakeWorker) { w.phase = kernelworker.PhaseStarting }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			al := h.mustAcquire(h.key("s"), h.newOwner(), withIdle(time.Minute))
			if c.release {
				require.NoError(t, h.release(al.Lease))
			}
			h.do(1, c.shape)
			h.clock.Advance(time.Hour)
			h.reapOnce()
			assert.Empty(t, h.stopsOf(1))
			assert.Equal(t, 1, h.snapshot().Live)
			assert.Empty(t, events[telemetry.SessionReap](h))
		})
	}
}

func TestEachKernelKeepsTheIdleTimeoutOfItsLatestAcquire(t *testing.T) {
	h := newHarness(t) // registry default: 30 minutes
	owner := h.newOwner()
	short := h.mustAcquire(h.key("short"), owner, withIdle(time.Minute))
	long := h.mustAcquire(h.key("long"), owner)
	never := h.mustAcquire(h.key("never"), owner, withIdle(-1))
	for _, a := range []Allocation{short, long, never} {
		require.NoError(t, h.release(a.Lease))
	}
	h.clock.Advance(2 * time.Minute)
	h.reapOnce()
	h.waitStops(1, "idle_reaped")
	assert.Empty(t, h.stopsOf(2))

	h.clock.Advance(time.Hour)
	h.reapOnce()
	h.waitStops(2, "idle_reaped")
	h.clock.Advance(1000 * time.Hour)
	h.reapOnce()
	assert.Empty(t, h.stopsOf(3), "a negative idle timeout never reaps")
}

func TestUnreachableKernelIsReaped(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StatusTimeout = 50 * time.Millisecond })
	al := h.mustAcquire(h.key("s"), h.newOwner())
	h.do(1, func(w *fakeWorker) { w.status = "silent" })
	h.reapOnce()
	h.waitStops(1, "shutdown")
	reaps := events[telemetry.SessionReap](h)
	require.Len(t, reaps, 1)
	assert.Equal(t, telemetry.ReapUnreachable, reaps[0].Reason)
	h.waitGone(al.Worker.PID())
}

// The reaper runs on the registry's own timer, not on messages arriving.
func TestReaperRunsOnItsOwnTimer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReapInterval = 5 * time.Millisecond })
	caller, cancel := context.WithCancel(context.Background())
	defer cancel()
	al := h.mustAcquire(h.key("s"), h.newOwner(), withIdle(time.Minute), withCaller(caller))
	require.NoError(t, h.release(al.Lease))
	h.clock.Advance(time.Minute)
	// No further message is sent to the registry: only its timer can reap.
	h.eventually(func() bool { return !h.alive(al.Worker.PID()) }, "idle kernel reaped by the timer")
	assert.Equal(t, []string{"idle_reaped"}, h.stopsOf(1))
}
