package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under --sandbox landlock the script itself reaches no server, while
// webfetch, which runs in the host (and the CLI allows private
// networks), fetches the same loopback page.
func TestSandboxedRunFetchesThroughWebfetchButNotByItself(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("served on loopback\n"))
	}))
	defer page.Close()
	script := fmt.Sprintf(`import urllib.request
try:
    urllib.request.urlopen(%q, timeout=5).read()
    text("script fetched")
except OSError as e:
    text("script refused: " + type(e).__name__)
text(webfetch(%q))
`, page.URL+"/", page.URL+"/")
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			r := cli(t, script, nil, "run", "--json", "--sandbox", "landlock", "--mode", mode, "--root", t.TempDir(), "-")
			require.Equal(t, 0, r.code, r.stdout+r.stderr)
			var res struct {
				Blocks  []string
				Details map[string]any
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			require.Len(t, res.Blocks, 2, r.stdout)
			assert.True(t, strings.HasPrefix(res.Blocks[0], "script refused: "), res.Blocks[0])
			assert.Contains(t, res.Blocks[1], "served on loopback")
			assert.Equal(t, map[string]any{"abi": res.Details["sandbox"].(map[string]any)["abi"], "fs": true, "net": true, "scoped": true, "seccomp": true}, res.Details["sandbox"])
		})
	}
}

// The snapshot shows the protections a configured sandbox applies, and
// none without one.
func TestSnapshotReportsTheSandbox(t *testing.T) {
	var snap struct {
		Sandbox map[string]any `json:"sandbox"`
	}
	r := cli(t, "", nil, "snapshot", "--sandbox", "landlock")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &snap))
	assert.Equal(t, true, snap.Sandbox["fs"])
	assert.Equal(t, true, snap.Sandbox["seccomp"])
	assert.GreaterOrEqual(t, snap.Sandbox["abi"], 6.0)

	r = cli(t, "", nil, "snapshot")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &snap))
	assert.Equal(t, map[string]any{"abi": 0.0, "fs": false, "net": false, "scoped": false, "seccomp": false}, snap.Sandbox)
}

// sandboxedVictim writes a block and a notification, makes a helper call,
// then waits for the test to drop "planted" into the tool root (which it
// may read, though not write) and calls twice more.
const sandboxedVictim = `
import os, time
text("b-real")
notify("b-note")
first = read("a.txt")
end = time.time() + 60
while not os.path.exists("planted") and time.time() < end:
    time.sleep(0.01)
a, b = read("a.txt"), read("a.txt")
text(a + "|" + b)
notify("b-done")
`

// sandboxedAttacker is handed the victim's bridge directory and the
// names of the files in it (the test lists them from the host) and tries
// to list, read and plant; each attempt is reported.
const sandboxedAttacker = `
import errno, json, os
P = json.loads(%s)
v = P["victim"]
R = {}
def check(name, f):
    try:
        f()
        R[name] = "ok"
    except OSError as e:
        R[name] = "denied " + errno.errorcode.get(e.errno, str(e.errno))
check("list_staging_root", lambda: os.listdir(P["root"]))
check("list_victim_home", lambda: os.listdir(os.path.dirname(os.path.dirname(v))))
check("list_victim_bridge", lambda: os.listdir(v))
for i, name in enumerate(P["files"]):
    check("read_%%d" %% i, lambda name=name: open(os.path.join(v, name), "rb").read())
check("plant_response", lambda: open(os.path.join(v, "res-2.json"), "wb").write(b'{"id":2,"ok":true,"content":"FORGED"}'))
check("plant_text", lambda: open(os.path.join(v, "text-99.json"), "wb").write(b'{"n": 99, "text": "FORGED"}'))
text(json.dumps(R, sort_keys=True))
`

// The cross-session attack of the trust issue, run under the sandbox:
// the other session's bridge is not only unforgeable but unreadable, and
// the victim's result is untouched.
func TestSandboxedSessionsCannotReadEachOthersBridges(t *testing.T) {
	tmp := t.TempDir()
	root := t.TempDir()
	writeFile(t, root, "a.txt", "alpha\n")
	p, _ := launchServe(t, tmp, []string{"LEMON_EXECUTE_CODE_SANDBOX=landlock"}, false, "--root", root)
	p.send(`{"id":1,"op":"attach","session":"victim","agent":"main"}`)
	p.send(`{"id":2,"op":"attach","session":"attacker","agent":"main"}`)
	require.Equal(t, true, p.answer()["ok"])
	require.Equal(t, true, p.answer()["ok"])
	p.send(`{"id":3,"op":"execute","session":"victim","timeout_ms":90000,"script":` + mustJSON(t, sandboxedVictim) + `}`)

	// From the host: the victim's bridge, once its text frame is there.
	var bridge string
	var files []string
	require.Eventually(t, func() bool {
		dirs, _ := filepath.Glob(filepath.Join(tmp, "execute-code-private-*", "python-kernel-*", "exec-code-cell-*", "rpc*"))
		if len(dirs) != 1 {
			return false
		}
		entries, _ := os.ReadDir(dirs[0])
		files = files[:0]
		for _, e := range entries {
			files = append(files, e.Name())
		}
		bridge = dirs[0]
		return containsPrefix(files, "text-")
	}, 60*time.Second, 10*time.Millisecond, "the victim's bridge")
	staging := filepath.Dir(filepath.Dir(filepath.Dir(bridge)))
	params, err := json.Marshal(map[string]any{"victim": bridge, "files": files, "root": staging})
	require.NoError(t, err)
	p.send(`{"id":4,"op":"execute","session":"attacker","timeout_ms":90000,"script":` +
		mustJSON(t, fmt.Sprintf(sandboxedAttacker, mustJSON(t, string(params)))) + `}`)

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
			if id == 4 {
				writeFile(t, root, "planted", "")
			}
		case <-time.After(120 * time.Second):
			t.Fatal("no results from serve")
		}
	}

	blocks, _ := results[4]["blocks"].([]any)
	require.Len(t, blocks, 1, "%v", results[4]["content"])
	var checks map[string]string
	require.NoError(t, json.Unmarshal([]byte(blocks[0].(string)), &checks))
	require.Contains(t, checks, "read_0")
	for name, got := range checks {
		assert.True(t, strings.HasPrefix(got, "denied "), "%s: %s", name, got)
	}

	victim := results[3]
	line := "     1\talpha"
	assert.Equal(t, []any{"b-real", line + "|" + line}, victim["blocks"])
	assert.Equal(t, []any{"b-note", "b-done"}, victimNotes)
	assert.Equal(t, "trusted", victim["trust"])
	content, _ := json.Marshal(victim["content"])
	assert.NotContains(t, string(content), "FORGED")
	details := victim["details"].(map[string]any)
	assert.Equal(t, 3.0, details["rpc_calls"])
	assert.Equal(t, 0.0, details["rpc_errors"])
	assert.NotNil(t, details["sandbox"])
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
