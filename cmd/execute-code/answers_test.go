package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// encodeMap is how every answer was encoded before the answer types:
// a map, whose keys encoding/json sorts.
func encodeMap(t *testing.T, v map[string]any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.String()
}

func encodeLine(v any) string {
	var buf bytes.Buffer
	newLineWriter(&buf, nil).send(v)
	return buf.String()
}

func anyID(id json.RawMessage) any {
	if len(id) == 0 {
		return nil
	}
	return id
}

// Clients may compare answers as bytes: each answer type encodes exactly
// as the map of the same keys did, for hostile ids and messages too.
func TestAnswerLinesAreByteForByteTheMapsTheyReplace(t *testing.T) {
	ids := []json.RawMessage{nil, json.RawMessage(`7`), json.RawMessage(`"a</script>&\u2028"`),
		json.RawMessage(`{"b": [1, 2], "a": null}`), json.RawMessage(`1e400`), json.RawMessage("\"\u2028\"")}
	msgs := []string{"", "plain", "<b>&amp;</b>", "quote \" backslash \\ nl \n", "\u2028\u2029 \x00", "\xff invalid"}
	exit := 1
	res := executecode.Result{Blocks: []string{"<hi>", "two"}, Details: &executecode.Details{ExitCode: &exit, RPCTools: []string{}}}
	for _, id := range ids {
		for _, msg := range msgs {
			assert.Equal(t, encodeMap(t, map[string]any{"id": anyID(id), "error": msg}), encodeLine(errorAnswer(id, msg)))
			assert.Equal(t, encodeMap(t, map[string]any{"id": anyID(id), "notify": msg}), encodeLine(notifyLine{ID: idValue(id), Notify: msg}))
		}
		assert.Equal(t, encodeMap(t, map[string]any{"id": anyID(id), "ok": true}), encodeLine(okLine{ID: idValue(id), OK: true}))
		assert.Equal(t, encodeMap(t, map[string]any{"id": anyID(id), "result": res}), encodeLine(resultLine{ID: idValue(id), Result: res}))
		snap := executecode.Snapshot{}
		assert.Equal(t, encodeMap(t, map[string]any{"id": anyID(id), "snapshot": snap}), encodeLine(snapshotLine{ID: idValue(id), Snapshot: snap}))
	}
}

// slowWriter takes its time over each write and records what it got.
type slowWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	delay  time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

// Many goroutines answering at once behind a slow client: every line
// arrives whole, once, each goroutine's in the order it sent them, and
// lines sent during a write go out together.
func TestLineWriterKeepsLinesWholeAndCoalescesThemUnderLoad(t *testing.T) {
	w := &slowWriter{delay: time.Millisecond}
	l := newLineWriter(w, nil)
	const senders, each = 16, 50
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.send(notifyLine{ID: json.RawMessage(fmt.Sprint(g)), Notify: fmt.Sprintf("%d %s", i, strings.Repeat("x", g*100))})
			}
		}()
	}
	wg.Wait()
	next := make([]int, senders)
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	require.Len(t, lines, senders*each)
	for _, line := range lines {
		var a struct {
			ID     int    `json:"id"`
			Notify string `json:"notify"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &a), line)
		assert.Equal(t, fmt.Sprintf("%d %s", next[a.ID], strings.Repeat("x", a.ID*100)), a.Notify)
		next[a.ID]++
	}
	assert.Less(t, w.writes, senders*each, "no line was written with another")
}

// failingWriter fails every write after the first n.
type failingWriter struct {
	n      atomic.Int64
	writes atomic.Int64
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.writes.Add(1) > w.n.Load() {
		return 0, errors.New("client went away")
	}
	time.Sleep(time.Millisecond)
	return len(p), nil
}

// A client that goes away mid-flood: broken is called once, every sender
// returns (none waits for room that will never come), and nothing is
// written after the failure.
func TestLineWriterBreaksOnceAndReleasesEverySender(t *testing.T) {
	w := &failingWriter{}
	w.n.Store(3)
	var broken atomic.Int64
	l := newLineWriter(w, func() { broken.Add(1) })
	big := strings.Repeat("y", pendingBound/4)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				l.send(notifyLine{Notify: big})
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(1), broken.Load())
	assert.Equal(t, int64(4), w.writes.Load(), "written after the failure")
}

// Queued lines wait for a flush or the next send, and then go out in
// one write, in order.
func TestLineWriterQueuedLinesGoOutWithTheNextSend(t *testing.T) {
	var w slowWriter
	l := newLineWriter(&w, nil)
	l.queue(errorAnswer(json.RawMessage(`1`), "one"))
	l.queue(errorAnswer(json.RawMessage(`2`), "two"))
	assert.Zero(t, w.writes)
	l.send(okLine{ID: json.RawMessage(`3`), OK: true})
	assert.Equal(t, 1, w.writes)
	assert.Equal(t, "{\"error\":\"one\",\"id\":1}\n{\"error\":\"two\",\"id\":2}\n{\"id\":3,\"ok\":true}\n", w.buf.String())
	l.queue(errorAnswer(nil, "four"))
	l.flush()
	assert.Equal(t, 2, w.writes)
	assert.True(t, strings.HasSuffix(w.buf.String(), "{\"error\":\"four\",\"id\":null}\n"))
}

// The Call an execute request makes is the one the tool's parameters
// made before (executecode.CallFromParams).
func TestExecuteArgsMakeTheCallTheParametersDid(t *testing.T) {
	for _, a := range []executeArgs{
		{Script: "x = 1"}, {Script: ""}, {Script: "y", TimeoutMS: 500, Reset: true}, {Script: "z", TimeoutMS: -3},
	} {
		params := map[string]any{"script": a.Script, "reset": a.Reset}
		if a.TimeoutMS != 0 {
			params["timeout_ms"] = a.TimeoutMS
		}
		want, wantErr := executecode.CallFromParams(params)
		got, err := a.call()
		assert.Equal(t, want, got, "%+v", a)
		assert.Equal(t, wantErr, err, "%+v", a)
	}
}

var _ io.Writer = (*slowWriter)(nil)
