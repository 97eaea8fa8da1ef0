package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveProc is a running `execute-code serve` driven through its pipes.
type serveProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan map[string]any
}

func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	return startServeIn(t, t.TempDir(), nil, args...)
}

// startServeIn starts serve with its staging under tmp and extra env.
func startServeIn(t *testing.T, tmp string, env []string, args ...string) *serveProc {
	t.Helper()
	p, _ := launchServe(t, tmp, env, false, args...)
	return p
}

// launchServe starts serve with its staging under tmp and extra env; with
// withStderr it also returns serve's stderr, which the caller must drain.
func launchServe(t *testing.T, tmp string, env []string, withStderr bool, args ...string) (*serveProc, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--root", t.TempDir()}, args...)...)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), env...)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr *bufio.Reader
	if withStderr {
		errPipe, err := cmd.StderrPipe()
		require.NoError(t, err)
		stderr = bufio.NewReader(errPipe)
	}
	require.NoError(t, cmd.Start())
	p := &serveProc{t: t, cmd: cmd, in: in, lines: make(chan map[string]any, 1000)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"unparseable": sc.Text()}
			}
			p.lines <- m
		}
	}()
	t.Cleanup(func() {
		_ = p.in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("serve did not exit after end of input")
		}
	})
	return p, stderr
}

func (p *serveProc) send(line string) {
	p.t.Helper()
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(p.t, err)
}

// answer waits for the next line that is not a notification.
func (p *serveProc) answer() map[string]any {
	p.t.Helper()
	for {
		select {
		case m, ok := <-p.lines:
			require.True(p.t, ok, "serve closed its output")
			if _, note := m["notify"]; note {
				continue
			}
			return m
		case <-time.After(60 * time.Second):
			p.t.Fatal("no answer from serve")
		}
	}
}

func blocks(t *testing.T, m map[string]any) []any {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	require.True(t, ok, "not a result: %v", m)
	b, _ := res["blocks"].([]any)
	return b
}

func TestServeKeepsSessionStateAcrossExecutes(t *testing.T) {
	p := startServe(t)
	p.send(`{"id":1,"op":"attach","session":"s1","agent":"main"}`)
	assert.Equal(t, map[string]any{"id": 1.0, "ok": true}, p.answer())
	p.send(`{"id":2,"op":"execute","session":"s1","script":"x = 41\ntext('set')"}`)
	assert.Equal(t, []any{"set"}, blocks(t, p.answer()))
	p.send(`{"id":3,"op":"execute","session":"s1","script":"x += 1\ntext(str(x))"}`)
	a := p.answer()
	assert.Equal(t, 3.0, a["id"])
	assert.Equal(t, []any{"42"}, blocks(t, a))
	details := a["result"].(map[string]any)["details"].(map[string]any)
	assert.Equal(t, true, details["persistent"])
	assert.Equal(t, true, details["kernel_reused"])
	p.send(`{"id":4,"op":"detach","session":"s1"}`)
	assert.Equal(t, map[string]any{"id": 4.0, "ok": true}, p.answer())
}

func TestServeAnswersBadLinesAndKeepsServing(t *testing.T) {
	p := startServe(t)
	cases := []struct{ line, want string }{
		{`{not json`, "not a JSON object"},
		{`[1,2]`, "not a JSON object"},
		{`{"id":7}`, `"op"`},
		{`{"id":8,"op":"dance"}`, `unknown op "dance"`},
		{`{"id":9,"op":"attach","session":5,"agent":"a"}`, `"session" has the wrong type`},
		{`{"id":10,"op":"execute","session":"s"}`, `missing field "script"`},
		{`{"id":11,"op":"approve","approval_id":"appr_x","decision":"allow"}`, "not_pending"},
		{"{\"id\":12,\"op\":\"attach\",\"session\":\"\xff\"}", "UTF-8"},
	}
	for _, tc := range cases {
		p.send(tc.line)
		a := p.answer()
		msg, _ := a["error"].(string)
		assert.Contains(t, msg, tc.want, tc.line)
	}
	p.send(`{"id":13,"op":"attach","session":"s","agent":"a"}`)
	assert.Equal(t, true, p.answer()["ok"])
	p.send(`{"id":14,"op":"attach","session":"s","agent":"other"}`)
	assert.Contains(t, p.answer()["error"], "another agent")
	p.send(`{"id":15,"op":"execute","session":"s","script":"text('still serving')"}`)
	assert.Equal(t, []any{"still serving"}, blocks(t, p.answer()))
}

func TestServeExecuteWithoutAttachedSessionRunsIsolated(t *testing.T) {
	p := startServe(t)
	p.send(`{"id":1,"op":"execute","session":"nobody","script":"notify('hi')\ntext('alone')"}`)
	var note map[string]any
	for m := range p.lines {
		if _, ok := m["notify"]; ok {
			note = m
			continue
		}
		details := m["result"].(map[string]any)["details"].(map[string]any)
		assert.Equal(t, "missing_session_scope", details["fallback_reason"])
		break
	}
	assert.Equal(t, map[string]any{"id": 1.0, "notify": "hi"}, note)
}

func TestServeSnapshotIsAnAggregate(t *testing.T) {
	p := startServe(t)
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.answer()
	p.send(`{"id":2,"op":"execute","session":"s","script":"x = 1"}`)
	p.answer()
	p.send(`{"id":3,"op":"snapshot"}`)
	snap := p.answer()["snapshot"].(map[string]any)
	assert.Equal(t, 1.0, snap["capacity"].(map[string]any)["live"])
	assert.NotContains(t, strings.ToLower(mustJSON(t, snap)), "/tmp")
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A client may stream its requests without waiting: cells of one session
// run in order, and a detach waits for the cells sent before it.
func TestServeRunsAStreamedSessionInOrder(t *testing.T) {
	p := startServe(t)
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.send(`{"id":2,"op":"execute","session":"s","script":"import time\ntime.sleep(0.3)\nx = 1\ntext('one')"}`)
	p.send(`{"id":3,"op":"execute","session":"s","script":"x += 1\ntext(str(x))"}`)
	p.send(`{"id":4,"op":"detach","session":"s"}`)
	p.send(`{"id":5,"op":"execute","session":"s","script":"text('after detach')"}`)
	got := map[float64]map[string]any{}
	var order []float64
	for len(got) < 5 {
		a := p.answer()
		id := a["id"].(float64)
		got[id] = a
		order = append(order, id)
	}
	assert.Equal(t, []any{"one"}, blocks(t, got[2]))
	assert.Equal(t, []any{"2"}, blocks(t, got[3]))
	assert.Equal(t, true, got[4]["ok"])
	assert.Less(t, indexOf(order, 3), indexOf(order, 4), "detach answers after the cells sent before it")
	details := got[5]["result"].(map[string]any)["details"].(map[string]any)
	assert.Equal(t, "missing_session_scope", details["fallback_reason"])
}

func indexOf(xs []float64, x float64) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// A session's later execute reads its spill back through the placeholder
// the result named; another session cannot.
func TestServeReadsASpillBackThroughItsPlaceholder(t *testing.T) {
	p := startServe(t)
	for i, s := range []string{"s1", "s2"} {
		p.send(fmt.Sprintf(`{"id":%d,"op":"attach","session":%q,"agent":"main"}`, i+1, s))
		assert.Equal(t, map[string]any{"id": float64(i + 1), "ok": true}, p.answer())
	}
	p.send(`{"id":3,"op":"execute","session":"s1","script":"for i in range(20000):\n    print('row', i)\n"}`)
	res := p.answer()["result"].(map[string]any)
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	m := regexp.MustCompile(`\[Full output saved to: (<spill>/spill-[A-Za-z0-9]+)\]`).FindStringSubmatch(text)
	require.NotNil(t, m, text)
	host := res["details"].(map[string]any)["full_output_path"].(string)
	assert.NotContains(t, text, host)
	read := fmt.Sprintf("try:\n    text(read(%q, offset=19999, limit=5))\nexcept ToolError as e:\n    text(str(e))\n", m[1])
	p.send(mustJSON(t, map[string]any{"id": 4, "op": "execute", "session": "s1", "script": read}))
	assert.Equal(t, []any{" 19999\trow 19998\n 20000\trow 19999"}, blocks(t, p.answer()))
	p.send(mustJSON(t, map[string]any{"id": 5, "op": "execute", "session": "s2", "script": read}))
	assert.Equal(t, []any{m[1] + ": not a spill file of this session"}, blocks(t, p.answer()))
}
