package kernelworker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Cell events carry counts, durations and reasons from fixed lists only:
// no code, output, token, path or exception text (docs/architecture.md,
// Telemetry).
func TestCellEventsCarryNoSecrets(t *testing.T) {
	const sentinel = "SENTINEL_7f3a"
	h := newKernelHarness(t)
	pid := h.start()
	bridge := &Bridge{Dir: t.TempDir(), Token: sentinel + "-token", MaxTextBytes: 100}
	withBridge := func(e *Execute) { e.Bridge = bridge }
	h.run(pid, "print('"+sentinel+"')", withBridge)
	h.run(pid, "raise ValueError('"+sentinel+"')", withBridge)
	h.run(pid, "import time\nprint('"+sentinel+"', flush=True)\ntime.sleep(600)", withBridge, withTimeout(300*time.Millisecond))
	h.waitGone(pid)

	allowed := map[string]map[string]bool{
		"coding_agent.python_repl.cell.start":  {"count": true, "queue_depth": true, "queue_capacity": true},
		"coding_agent.python_repl.cell.stop":   {"count": true, "duration_ms": true, "outcome": true, "dropped_late_output_bytes": true},
		"coding_agent.python_repl.cell.cancel": {"count": true, "duration_ms": true, "cause": true},
	}
	events := h.rec.Events()
	require.NotEmpty(t, events)
	for _, e := range events {
		keys, ok := allowed[e.Name()]
		require.True(t, ok, "unexpected event %s", e.Name())
		var buf bytes.Buffer
		log := zerolog.New(&buf)
		log.Log().EmbedObject(e).Send()
		assert.NotContains(t, buf.String(), sentinel)
		assert.NotContains(t, buf.String(), h.root)
		assert.NotContains(t, buf.String(), h.opts.Cwd)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &fields))
		for k, v := range fields {
			assert.True(t, keys[k], "%s carries %q", e.Name(), k)
			switch v := v.(type) {
			case float64:
				assert.GreaterOrEqual(t, v, 0.0, "%s.%s", e.Name(), k)
			case string:
				assert.False(t, strings.ContainsAny(v, "/ "), "%s.%s = %q is not an enum", e.Name(), k, v)
			default:
				t.Errorf("%s.%s has type %T", e.Name(), k, v)
			}
		}
	}
}
