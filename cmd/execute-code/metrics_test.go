package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serve --metrics-addr exposes /metrics on loopback; a scrape after a
// cell sees the cell, the kernel and the snapshot gauges, and nothing of
// the script.
func TestServeExposesMetricsOnLoopback(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--root", t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	waited := make(chan error, 1)
	t.Cleanup(func() {
		_ = in.Close()
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
			t.Error("serve did not exit after end of input")
		}
	})

	stderr := bufio.NewReader(errPipe)
	line, err := stderr.ReadString('\n')
	require.NoError(t, err)
	const prefix = "execute-code serve: metrics at "
	require.True(t, strings.HasPrefix(line, prefix), line)
	url := strings.TrimSpace(strings.TrimPrefix(line, prefix))
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	go func() { _, _ = io.Copy(io.Discard, stderr) }()

	answers := bufio.NewScanner(out)
	go func() { waited <- cmd.Wait() }()
	send := func(line string) map[string]any {
		_, err := io.WriteString(in, line+"\n")
		require.NoError(t, err)
		for answers.Scan() {
			var m map[string]any
			require.NoError(t, json.Unmarshal(answers.Bytes(), &m))
			if _, note := m["notify"]; !note {
				return m
			}
		}
		t.Fatal("serve closed its output")
		return nil
	}
	send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	res := send(`{"id":2,"op":"execute","session":"s","script":"print('SECRET_7f3a')\ntext('done')"}`)
	require.Contains(t, res, "result")

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
