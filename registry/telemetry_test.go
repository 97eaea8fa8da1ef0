package registry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

// marshal renders an event the way the log handler does.
func marshal(t *testing.T, e telemetry.Event) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	logger := zerolog.New(&buf)
	logger.Log().EmbedObject(e).Send()
	var out map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &out))
	return out
}

// The registry's events carry counts, durations and fixed reasons only;
// never a path, digest, PID, owner or generation.
func TestRegistryEventsCarryNoIdentities(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StopTimeout = 20 * time.Millisecond })
	h.onStart = func(gen uint64, w *fakeWorker) { w.ignoreStop = gen == 4 }
	owner := h.newOwner()
	k := h.key("secret-scope")
	a := h.mustAcquire(k, owner, withMax(1), withIdle(time.Minute))
	require.NoError(t, h.release(a.Lease))
	b := h.mustAcquire(h.key("other"), owner, withMax(1)) // evicts a
	h.sys.Root.Send(b.Worker.PID(), fakeDie{})            // crash
	h.eventually(func() bool { return len(events[telemetry.SessionCrash](h)) == 1 }, "crash seen")
	h.failNextStart()
	h.acquire(k, owner) // startup failure
	c := h.mustAcquire(k, owner, withIdle(time.Minute))
	require.NoError(t, h.release(c.Lease))
	h.clock.Advance(time.Hour)
	h.reapOnce() // idle reap
	d := h.mustAcquire(h.key("stuck"), owner)
	require.Equal(t, uint64(4), d.Generation)
	assert.ErrorIs(t, h.reset(h.key("stuck"), owner).Err, ErrStopFailed)
	h.eventually(func() bool { return len(events[telemetry.SessionStop](h)) == 3 }, "every stop reported")

	forbidden := []string{k.Cwd, k.Interpreter, k.Digest(), "secret-scope", a.Worker.PID().Id, owner.Id, a.Worker.PID().Address}
	names := map[string]bool{}
	for _, e := range h.rec.Events() {
		names[e.Name()] = true
		for field, v := range marshal(t, e) {
			switch v := v.(type) {
			case float64:
				assert.GreaterOrEqual(t, v, 0.0, "%s.%s", e.Name(), field)
			case string:
				assert.Equal(t, "reason", field, "%s: only the reason is a string", e.Name())
				for _, f := range forbidden {
					assert.False(t, strings.Contains(v, f), "%s.%s leaks %q", e.Name(), field, f)
				}
			default:
				t.Errorf("%s.%s has a %T", e.Name(), field, v)
			}
		}
	}
	for _, n := range []string{"session.start", "session.stop", "session.crash", "session.reap", "fallback"} {
		assert.True(t, names["coding_agent.python_repl."+n], "no %s event", n)
	}
}

func TestRegistryEventsCoerceBadValues(t *testing.T) {
	cases := map[string]struct {
		e    telemetry.Event
		want map[string]any
	}{
		"stop": {telemetry.SessionStop{Duration: -time.Second, LiveKernels: -1, Capacity: -2, Reason: "bogus"},
			map[string]any{"count": 1.0, "duration_ms": 0.0, "live_kernels": 0.0, "capacity": 0.0, "reason": "shutdown"}},
		"crash": {telemetry.SessionCrash{Reason: "bogus"},
			map[string]any{"count": 1.0, "duration_ms": 0.0, "live_kernels": 0.0, "capacity": 0.0, "reason": "unknown"}},
		"reap": {telemetry.SessionReap{Idle: -1, Reason: "bogus"},
			map[string]any{"count": 1.0, "idle_ms": 0.0, "live_kernels": 0.0, "capacity": 0.0, "reason": "unreachable"}},
		"start": {telemetry.SessionStart{LiveKernels: -3, Capacity: 4},
			map[string]any{"count": 1.0, "live_kernels": 0.0, "capacity": 4.0}},
		"fallback": {telemetry.Fallback{Reason: "bogus"}, map[string]any{"count": 1.0, "reason": "unknown"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, marshal(t, c.e))
		})
	}
}
