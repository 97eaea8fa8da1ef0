package registry

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/kernelworker"
)

// The snapshot reports the settings in effect (those of the
// latest acquire) and exact counts.
func TestSnapshotReportsExactCountsAndTheSettingsInEffect(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReapInterval = time.Hour })
	s := h.snapshot()
	assert.Equal(t, 16, s.Max, "the configuration before any acquire")
	assert.Equal(t, 30*time.Minute, s.IdleTimeout)

	a, b := h.newOwner(), h.newOwner()
	idle := h.mustAcquire(h.key("idle"), a, withMax(5), withIdle(time.Minute))
	require.NoError(t, h.release(idle.Lease))
	running := h.mustAcquire(h.key("running"), b, withMax(5), withIdle(time.Minute))
	h.execute(running)
	h.mustAcquire(h.key("running"), a, withMax(5), withIdle(time.Minute)) // a lease, no cell
	starting := h.mustAcquire(h.key("starting"), b, withMax(5), withIdle(time.Minute))
	h.do(starting.Generation, func(w *fakeWorker) { w.phase = kernelworker.PhaseStarting })
	// a forks away from the shared kernel; its lease there ends, and as it
	// had no cell there, b's running cell and the kernel are untouched.
	rr := h.reset(h.key("running"), a)
	require.NoError(t, rr.Err)
	require.True(t, rr.Forked)

	s = h.snapshot()
	assert.Equal(t, 3, s.Live)
	assert.Equal(t, 5, s.Max)
	assert.Equal(t, 2, s.Available)
	assert.Equal(t, time.Minute, s.IdleTimeout)
	assert.Equal(t, time.Hour, s.ReapInterval)
	assert.Equal(t, map[string]int{"starting": 1, "idle": 1, "running": 1, "cancelling": 0, "stopping": 0, "unreachable": 0}, s.Phases)
	assert.Equal(t, 2, s.InflightCells)
	assert.Equal(t, 2, s.Owners)
	assert.Equal(t, 1, s.ForkedOwners)
}

// Nothing in a snapshot identifies a kernel, key, path, owner or generation.
func TestSnapshotCarriesOnlyCountsAndDurations(t *testing.T) {
	typ := reflect.TypeFor[Snapshot]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type {
		case reflect.TypeFor[int](), reflect.TypeFor[time.Duration](), reflect.TypeFor[map[string]int]():
		default:
			t.Errorf("field %s has type %s", f.Name, f.Type)
		}
	}
}
