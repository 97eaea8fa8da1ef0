package introspect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/telemetry"
)

func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&b, f)
		require.NoError(t, err)
	}
	return b.String()
}

// Label values come from the enums' fixed lists: a value outside a list
// is counted under the list's default, never as itself.
func TestMetricLabelsAreBoundedWhateverTheEvent(t *testing.T) {
	m := NewMetrics(nil, nil)
	m.Handle(telemetry.SessionCrash{Reason: "/home/user/secret"})
	m.Handle(telemetry.CellStop{Outcome: "print(secret)", Duration: time.Second})
	m.Handle(telemetry.Fallback{Reason: "weird"})
	m.Handle(telemetry.ApprovalResolved{Tool: "bash -c rm", Decision: "maybe"})
	m.ObserveRoundTrip(pump.RoundTrip{Tool: "/etc/passwd", Duration: time.Millisecond, Outcome: "strange"})
	text := exposition(t, m)
	for _, want := range []string{
		`execute_code_sessions_crashed_total{reason="unknown"} 1`,
		`execute_code_cells_stopped_total{outcome="unknown"} 1`,
		`execute_code_fallbacks_total{reason="unknown"} 1`,
		`execute_code_approvals_resolved_total{decision="unknown",tool="other"} 1`,
		`execute_code_helper_round_trip_seconds_count{outcome="error",tool="other"} 1`,
	} {
		assert.Contains(t, text, want+"\n")
	}
	for _, bad := range []string{"secret", "weird", "bash", "maybe", "passwd", "strange"} {
		assert.NotContains(t, text, bad)
	}
}

func TestASnapshotThatCannotBeReadIsReportedDown(t *testing.T) {
	m := NewMetrics(func(context.Context) (Snapshot, error) { return Snapshot{}, errors.New("gone") }, func() uint64 { return 4 })
	text := exposition(t, m)
	assert.Contains(t, text, "execute_code_snapshot_up 0\n")
	assert.Contains(t, text, "execute_code_telemetry_events_dropped_total 4\n")
	assert.NotContains(t, text, "execute_code_live_kernels")
}

func TestGaugesFollowTheSnapshot(t *testing.T) {
	snap := Empty(Settings{MaxLiveKernels: 4, QueueCapacity: 8})
	snap.Capacity.Live, snap.Phases["running"], snap.Queues.Queued, snap.Queues.Deepest = 2, 2, 3, 2
	m := NewMetrics(func(context.Context) (Snapshot, error) { return snap, nil }, nil)
	text := exposition(t, m)
	for _, want := range []string{
		"execute_code_snapshot_up 1", "execute_code_live_kernels 2", "execute_code_kernel_capacity 4",
		`execute_code_kernels{phase="running"} 2`, `execute_code_kernels{phase="idle"} 0`,
		"execute_code_queued_cells 3", "execute_code_deepest_queue 2",
	} {
		assert.Contains(t, text, want+"\n")
	}
}
