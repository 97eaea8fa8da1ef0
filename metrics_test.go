package executecode_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/executecode/executecode/config"
)

func TestMetricsCountEventsAndReadTheSnapshot(t *testing.T) {
	r := newRig(t, withCfg(func(c *config.Config) { c.MaxQueuedCellsPerKernel = 3 }))
	writeFile(t, r.root, "a.txt", "a")
	o := r.attach("s")
	r.run(o, "read('a.txt')")
	r.run(o, "raise ValueError('x')")
	r.run(nil, "import sys\nsys.exit(2)") // isolated: missing_session_scope
	other := r.attach("other")
	r.run(other, "import os\nos._exit(1)")
	r.expectSince(0, false,
		"session.start live=1", "cell.start", "cell.stop(ok)", "cell.start", "cell.stop(exception)",
		"fallback(missing_session_scope)", "execute_code.stop",
		"session.start live=2", "cell.start", "cell.stop(port_exit)", "cell.cancel(shutdown)", "session.crash(port_exit) live=1")

	text := scrape(t, r.rt)
	for _, want := range []string{
		`execute_code_sessions_started_total 2`,
		`execute_code_sessions_crashed_total{reason="port_exit"} 1`,
		`execute_code_sessions_crashed_total{reason="unknown"} 0`,
		`execute_code_cells_started_total 3`,
		`execute_code_cells_stopped_total{outcome="ok"} 1`,
		`execute_code_cells_stopped_total{outcome="exception"} 1`,
		`execute_code_cells_stopped_total{outcome="port_exit"} 1`,
		`execute_code_cells_cancelled_total{cause="shutdown"} 1`,
		`execute_code_cell_duration_seconds_count{outcome="ok"} 1`,
		`execute_code_fallbacks_total{reason="missing_session_scope"} 1`,
		`execute_code_fallbacks_total{reason="capacity_exhausted"} 0`,
		`execute_code_runs_total{exit="nonzero"} 1`,
		`execute_code_run_duration_seconds_count 1`,
		`execute_code_helper_round_trip_seconds_count{outcome="ok",tool="read"} 1`,
		`execute_code_bridge_denials_total{reason="authentication"} 0`,
		`execute_code_evictions_total 0`,
		`execute_code_snapshot_up 1`,
		`execute_code_live_kernels 1`,
		`execute_code_kernel_capacity 16`,
		`execute_code_kernels{phase="idle"} 1`,
		`execute_code_inflight_cells 0`,
		`execute_code_queued_cells 0`,
		`execute_code_telemetry_events_dropped_total 0`,
	} {
		assert.Contains(t, text, want+"\n")
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "execute_code_") {
			assert.NotContains(t, line, "/", "a metric line carries a path: %s", line)
		}
	}
}
