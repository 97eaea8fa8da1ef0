package introspect

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/telemetry"
)

func TestJournalKeepsTheLatestPythonReplEventsOldestFirst(t *testing.T) {
	j := NewJournal(3)
	j.Handle(telemetry.ExecuteCodeStop{}) // not a python_repl event
	j.Handle(telemetry.SessionStart{LiveKernels: 1, Capacity: 16})
	j.Handle(telemetry.CellStart{QueueCapacity: 8})
	j.Handle(telemetry.CellStop{Duration: 2 * time.Second, Outcome: telemetry.OutcomeOK, DroppedLateOutput: 5})
	j.Handle(telemetry.Fallback{Reason: telemetry.FallbackCapacityExhausted})
	j.Handle(telemetry.CellStop{DroppedLateOutput: 7})
	got := j.Entries()
	require.Len(t, got, 3)
	assert.Equal(t, []uint64{3, 4, 5}, []uint64{got[0].Seq, got[1].Seq, got[2].Seq})
	assert.Equal(t, "cell_stopped", got[0].Event)
	assert.Equal(t, map[string]int64{"count": 1, "duration_ms": 2000, "dropped_late_output_bytes": 5}, got[0].Measurements)
	assert.Equal(t, map[string]string{"outcome": "ok"}, got[0].Metadata)
	assert.Equal(t, "fallback", got[1].Event)
	assert.Equal(t, "capacity_exhausted", got[1].Metadata["reason"])
	for _, e := range got {
		assert.Equal(t, Kind, e.Kind)
		assert.False(t, e.At.IsZero())
	}
	assert.Equal(t, int64(12), j.DroppedLateOutputBytes())

	got[0].Metadata["outcome"] = "tampered"
	assert.Equal(t, "ok", j.Entries()[0].Metadata["outcome"], "a reader cannot change the ring")
}

func TestAJournalOfSizeZeroStoresNothingButStillCounts(t *testing.T) {
	j := NewJournal(0)
	j.Handle(telemetry.CellStop{DroppedLateOutput: 3})
	assert.Empty(t, j.Entries())
	assert.Equal(t, int64(3), j.DroppedLateOutputBytes())
	var none *Journal
	assert.Empty(t, none.Entries())
	assert.Zero(t, none.DroppedLateOutputBytes())
}
