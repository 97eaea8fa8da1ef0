package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serve --metrics-addr exposes /metrics on loopback; a scrape after a
// cell sees the cell, the kernel and the snapshot gauges, and nothing of
// the script.
func TestServeExposesMetricsOnLoopback(t *testing.T) {
	p, url := startServeWithMetrics(t)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.answer()
	p.send(`{"id":2,"op":"execute","session":"s","script":"print('SECRET_7f3a')\ntext('done')"}`)
	require.Contains(t, p.answer(), "result")

	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	text := string(body)
	for _, want := range []string{
		"execute_code_sessions_started_total 1",
		`execute_code_cells_stopped_total{outcome="ok"} 1`,
		"execute_code_live_kernels 1",
		`execute_code_kernels{phase="idle"} 1`,
		"execute_code_snapshot_up 1",
	} {
		assert.Contains(t, text, want+"\n")
	}
	assert.NotContains(t, text, "SECRET_7f3a")
}

func TestServeRefusesAMetricsAddressBeyondLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "example.com:9090", "9090", ":9090"} {
		r := cli(t, "", nil, "serve", "--metrics-addr", addr)
		assert.Equal(t, 2, r.code, addr)
		assert.Contains(t, r.stderr, "--metrics-addr", addr)
	}
}
