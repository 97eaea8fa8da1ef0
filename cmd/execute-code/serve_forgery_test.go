package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServeWithMetrics is startServe with --metrics-addr on a loopback
// port of its choosing; it returns the /metrics address serve printed.
func startServeWithMetrics(t *testing.T) (*serveProc, string) {
	t.Helper()
	p, stderr := launchServe(t, t.TempDir(), nil, true, "--metrics-addr", "127.0.0.1:0")
	line, err := stderr.ReadString('\n')
	require.NoError(t, err)
	const prefix = "execute-code serve: metrics at "
	require.True(t, strings.HasPrefix(line, prefix), line)
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return p, strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

// scrapeCounter reads one sample of the metrics endpoint.
func scrapeCounter(t *testing.T, url, sample string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\d+)$`).FindSubmatch(body)
	require.NotNil(t, m, "no %s in\n%s", sample, body)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// victimCell and attackerCell: session B writes a block and a
// notification, waits while session A plants files into B's rpc
// directory (found by listing the staging root both share), then makes
// two helper calls whose responses A planted first. A plants frames
// without a MAC, frames under its own token, and B's own genuine text
// frames copied under other numbers and as notifications; its block
// counts the frames B's host reads.
const victimCell = `
import os, time
open("a.txt", "w").write("alpha\n")
text("b-real")
notify("b-note")
open("victim-ready", "w").close()
end = time.time() + 60
while not os.path.exists("planted") and time.time() < end:
    time.sleep(0.01)
a, b = read("a.txt"), read("a.txt")
text(a + "|" + b)
notify("b-done")
`

const attackerCell = `
import glob, json, os, re, time, exec_tools
me = exec_tools._BRIDGE
end = time.time() + 60
while not os.path.exists("victim-ready") and time.time() < end:
    time.sleep(0.01)
root = me.dir
while not os.path.basename(root).startswith("execute-code-private-"):
    root = os.path.dirname(root)
victims = [d for d in glob.glob(os.path.join(root, "exec-code*", "rpc*")) + glob.glob(os.path.join(root, "python-kernel*", "exec-code*", "rpc*")) if d != me.dir]
assert len(victims) == 1, victims
v = victims[0]
counts = {"text": 0, "notify": 0}
def put(name, data):
    tmp = os.path.join(v, "." + name + ".x")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(v, name))
    kind = name.split("-")[0]
    if kind in counts:
        counts[kind] += 1
forged = b'{"n": 99, "text": "FORGED"}'
put("text-99.json", forged)
put("text-98-%s.json" % me.mac(b"text", b"98", forged), forged)
for name in sorted(os.listdir(v)):
    m = re.match(r"text-(\d+)-([0-9a-f]{32})\.json$", name)
    if m:
        data = open(os.path.join(v, name), "rb").read()
        put("text-%d-%s.json" % (int(m.group(1)) + 50, m.group(2)), data)
        put("notify-%d-%s.json" % (int(m.group(1)) + 50, m.group(2)), data)
put("notify-1.json", b'{"n": 1, "msg": "FORGED"}')
for i in (1, 2):
    put("res-%d.json" % i, b'{"id":%d,"ok":true,"content":"FORGED"}' % i)
open("planted", "w").close()
text(json.dumps(counts))
`

// Issue 10 item 7 through serve: a cell of one session cannot put
// anything into another session's result, and serve's metrics count each
// refused frame.
func TestServeSessionsCannotForgeEachOthersResults(t *testing.T) {
	p, url := startServeWithMetrics(t)
	const denials = `execute_code_bridge_denials_total{reason="authentication"}`
	require.Zero(t, scrapeCounter(t, url, denials))
	p.send(`{"id":1,"op":"attach","session":"victim","agent":"main"}`)
	p.send(`{"id":2,"op":"attach","session":"attacker","agent":"main"}`)
	require.Equal(t, true, p.answer()["ok"])
	require.Equal(t, true, p.answer()["ok"])
	p.send(`{"id":3,"op":"execute","session":"victim","timeout_ms":90000,"script":` + mustJSON(t, victimCell) + `}`)
	p.send(`{"id":4,"op":"execute","session":"attacker","timeout_ms":90000,"script":` + mustJSON(t, attackerCell) + `}`)

	results := map[float64]map[string]any{}
	var victimNotes []any
	for len(results) < 2 {
		select {
		case m, ok := <-p.lines:
			require.True(t, ok, "serve closed its output")
			id, _ := m["id"].(float64)
			if note, isNote := m["notify"]; isNote {
				if id == 3 {
					victimNotes = append(victimNotes, note)
				}
				continue
			}
			res, isResult := m["result"].(map[string]any)
			require.True(t, isResult, "not a result: %v", m)
			results[id] = res
		case <-time.After(120 * time.Second):
			t.Fatal("no results from serve")
		}
	}

	attacker := results[4]
	attackerBlocks, _ := attacker["blocks"].([]any)
	require.Len(t, attackerBlocks, 1, "%v", attacker["content"])
	var counts map[string]int
	require.NoError(t, json.Unmarshal([]byte(attackerBlocks[0].(string)), &counts))
	require.Positive(t, counts["text"])

	victim := results[3]
	line := "     1\talpha"
	assert.Equal(t, []any{"b-real", line + "|" + line}, victim["blocks"])
	assert.Equal(t, []any{"b-note", "b-done"}, victimNotes)
	assert.Equal(t, "trusted", victim["trust"])
	content, _ := json.Marshal(victim["content"])
	assert.NotContains(t, string(content), "FORGED")
	details := victim["details"].(map[string]any)
	assert.Equal(t, 2.0, details["rpc_calls"])
	assert.Equal(t, 0.0, details["rpc_denied"])
	assert.Equal(t, 0.0, details["rpc_errors"])
	assert.Equal(t, true, details["state_retained"])
	assert.Nil(t, details["reason"])

	assert.Equal(t, counts["text"]+counts["notify"], scrapeCounter(t, url, denials))
}
