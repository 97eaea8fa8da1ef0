package shimpy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var childBells = &Bells{Request: 3, Response: 4}

// wakeMode is how a run's shim learns that its response is there.
type wakeMode struct {
	name  string
	bells bool // configure bells=(3, 4)
	ring  bool // the responder rings the response bell
	ids   bool // with the answered id, as the pump does, not a plain byte
}

var wakeModes = []wakeMode{
	{"polling", false, false, false},
	{"doorbell", true, true, false},
	{"doorbell never rung", true, false, false},
	{"doorbell naming the answered id", true, true, true},
}

// bridgeRun is a started script with a responder serving its rpc dir.
type bridgeRun struct {
	stage *stage
	proc  *proc
	host  *responder
	bells *bellPipes
}

func startBridgeRun(t *testing.T, mode wakeMode, tools []string, script string) *bridgeRun {
	t.Helper()
	var b *Bells
	if mode.bells {
		b = childBells
	}
	s := newStage(t, tools, 0, b)
	run := &bridgeRun{stage: s}
	var extra []*os.File
	var ring *os.File
	if mode.bells {
		run.bells = newBellPipes(t)
		extra = run.bells.ChildFiles()
		if mode.ring {
			ring = run.bells.responseWrite
		}
	}
	run.host = startResponder(t, s.rpc, ring)
	run.host.ids = mode.ids
	run.proc = s.start(t, script, extra...)
	if run.bells != nil {
		run.bells.releaseChildEnds()
	}
	return run
}

func TestHelperReturnsTheHostsContent(t *testing.T) {
	for _, mode := range wakeModes {
		t.Run(mode.name, func(t *testing.T) {
			run := startBridgeRun(t, mode, []string{"read"}, `
import json
print(json.dumps(read("a.txt", limit=5)))
print(json.dumps(read("b.txt")))
`)
			for id, content := range []string{"hello\nworld", "é \U0001F600"} {
				req := run.host.next(t)
				assert.Equal(t, id+1, req.file)
				assert.Equal(t, id+1, req.ID)
				assert.Equal(t, testToken, req.Token)
				assert.Equal(t, "read", req.Tool)
				run.host.answer(t, req.file, okResponse(req.file, content))
			}
			out := requireClean(t, run.proc.wait())
			assert.Equal(t, "\"hello\\nworld\"\n\"\\u00e9 \\ud83d\\ude00\"\n", out)
		})
	}
}

func TestStubsSendTheirParamsWithoutNones(t *testing.T) {
	cases := []struct {
		call, tool, params string
	}{
		{`read("f.py", offset=3, limit=None)`, "read", `{"path":"f.py","offset":3}`},
		{`read("f.py", 1, 2)`, "read", `{"path":"f.py","offset":1,"limit":2}`},
		{`grep("TODO", path="src", glob="*.go", case_sensitive=False, literal=True, context_lines=2, max_results=9)`, "grep",
			`{"pattern":"TODO","path":"src","glob":"*.go","case_sensitive":false,"literal":true,"context_lines":2,"max_results":9}`},
		{`grep("x")`, "grep", `{"pattern":"x"}`},
		{`find("*.md", path="docs", type="f", max_depth=2, max_results=5, hidden=True)`, "find",
			`{"pattern":"*.md","path":"docs","type":"f","max_depth":2,"max_results":5,"hidden":true}`},
		{`ls()`, "ls", `{}`},
		{`ls("d", all=True, long=False, recursive=True, max_depth=1, max_entries=10)`, "ls",
			`{"path":"d","all":true,"long":false,"recursive":true,"max_depth":1,"max_entries":10}`},
		{`webfetch("https://example.com", extract_mode="text", max_chars=100)`, "webfetch",
			`{"url":"https://example.com","extractMode":"text","maxChars":100}`},
		{`webfetch("https://example.com")`, "webfetch", `{"url":"https://example.com"}`},
	}
	for _, tc := range cases {
		t.Run(tc.call, func(t *testing.T) {
			run := startBridgeRun(t, wakeModes[1], allTools, "print("+tc.call+")")
			req := run.host.next(t)
			assert.Equal(t, tc.tool, req.Tool)
			assert.JSONEq(t, tc.params, string(req.Params))
			run.host.answer(t, req.file, okResponse(req.file, "done"))
			assert.Equal(t, "done\n", requireClean(t, run.proc.wait()))
		})
	}
}

func TestHelperRaisesToolErrorForAFailedCall(t *testing.T) {
	cases := []struct {
		name     string
		response func(id int) any
		want     string
	}{
		{"host message", func(id int) any { return errResponse(id, "no such file") }, "ToolError: no such file"},
		{"empty message", func(id int) any { return errResponse(id, "") }, "ToolError: tool call failed"},
		{"no ok, no error", func(id int) any { return map[string]any{"id": id} }, "ToolError: tool call failed"},
		{"ok without content", func(id int) any { return map[string]any{"id": id, "ok": true} }, "ok: ''"},
		{"not JSON", func(int) any { return []byte("{not json") }, "ToolError: invalid rpc response"},
		{"invalid UTF-8", func(int) any { return []byte("{\"ok\": true, \"content\": \"\xff\"}") }, "ToolError: invalid rpc response"},
		{"empty file", func(int) any { return []byte{} }, "ToolError: invalid rpc response"},
		{"not an object", func(int) any { return []byte(`["ok"]`) }, "ToolError: invalid rpc response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := startBridgeRun(t, wakeModes[1], []string{"read"}, `
try:
    print("ok: %r" % (read("x"),))
except ToolError as e:
    print("ToolError: %s" % e)
`)
			req := run.host.next(t)
			run.host.answer(t, req.file, tc.response(req.file))
			assert.Equal(t, tc.want+"\n", requireClean(t, run.proc.wait()))
		})
	}
}

func TestBatchReturnsResultsInInputOrder(t *testing.T) {
	for _, mode := range wakeModes {
		t.Run(mode.name, func(t *testing.T) {
			run := startBridgeRun(t, mode, []string{"read"}, `
import json
print(json.dumps(batch([("read", {"path": "p%d" % i, "limit": None}) for i in range(5)])))
`)
			byPath := map[string]int{}
			for range 5 {
				req := run.host.next(t)
				var params map[string]any
				require.NoError(t, json.Unmarshal(req.Params, &params))
				assert.NotContains(t, params, "limit", "None params are dropped")
				byPath[params["path"].(string)] = req.file
			}
			require.Len(t, byPath, 5, "all five calls are in flight at once")
			for i := 4; i >= 0; i-- {
				id := byPath[fmt.Sprintf("p%d", i)]
				run.host.answer(t, id, okResponse(id, fmt.Sprintf("r%d", i)))
			}
			var got []string
			lastJSONLine(t, requireClean(t, run.proc.wait()), &got)
			assert.Equal(t, []string{"r0", "r1", "r2", "r3", "r4"}, got)
		})
	}
}

func TestBatchRaisesTheFirstFailureInInputOrderAfterEveryCallFinished(t *testing.T) {
	for _, mode := range wakeModes {
		t.Run(mode.name, func(t *testing.T) {
			run := startBridgeRun(t, mode, []string{"read"}, `
import json, os, threading, exec_tools
try:
    batch([("read", {"path": "p%d" % i}) for i in range(5)])
    print("no error")
except ToolError as e:
    answered = sorted(n for n in os.listdir(exec_tools._BRIDGE.dir) if n.startswith("res-"))
    print(json.dumps({"error": str(e), "answered": len(answered), "threads": threading.active_count()}))
`)
			byPath := map[string]int{}
			for range 5 {
				req := run.host.next(t)
				var params map[string]string
				require.NoError(t, json.Unmarshal(req.Params, &params))
				byPath[params["path"]] = req.file
			}
			// The later failure is answered first, the successes last:
			// batch must still wait for them and report p1's failure.
			for _, i := range []int{3, 1, 4, 2, 0} {
				id := byPath[fmt.Sprintf("p%d", i)]
				if i == 1 || i == 3 {
					run.host.answer(t, id, errResponse(id, fmt.Sprintf("failed p%d", i)))
				} else {
					run.host.answer(t, id, okResponse(id, "ok"))
				}
			}
			var res struct {
				Error    string
				Answered int
				Threads  int
			}
			lastJSONLine(t, requireClean(t, run.proc.wait()), &res)
			assert.Equal(t, "failed p1", res.Error)
			assert.Equal(t, 5, res.Answered)
			assert.Equal(t, 1, res.Threads, "no pool thread outlives the batch")
		})
	}
}

func TestBatchOfNothingCallsNothing(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, "print(batch([]), batch(iter(())))"))
	assert.Equal(t, "[] []\n", out)
	assert.Empty(t, listDir(t, s.rpc))
}

func TestBatchRefusesAMalformedCallBeforeSendingAny(t *testing.T) {
	s := newStage(t, []string{"read"}, 0, nil)
	out := requireClean(t, s.run(t, `
try:
    batch([("read", {"path": "a"}), ("read",)])
except ValueError:
    print("ValueError")
`))
	assert.Equal(t, "ValueError\n", out)
	assert.Empty(t, listDir(t, s.rpc))
}

func TestShimRingsOncePerRequestAndNotification(t *testing.T) {
	run := startBridgeRun(t, wakeModes[1], []string{"read"}, `
notify("one")
read("a")
notify("two")
text("not rung")
print(read("b"))
`)
	var names []string
	for range 2 {
		req := run.host.next(t)
		names = append(names, req.name)
		run.host.answer(t, req.file, okResponse(req.file, "fine"))
	}
	assert.Equal(t, "fine\n", requireClean(t, run.proc.wait()))
	// A request is rung with its name, the part between "req-" and
	// ".json", and a newline; a notification with one plain byte.
	want := "\x00" + strings.TrimSuffix(strings.TrimPrefix(names[0], "req-"), ".json") + "\n" +
		"\x00" + strings.TrimSuffix(strings.TrimPrefix(names[1], "req-"), ".json") + "\n"
	assert.Equal(t, want, string(run.bells.rungAfterExit(t)))
}

func TestShimFallsBackToPollingWhenTheHostClosesItsBell(t *testing.T) {
	run := startBridgeRun(t, wakeModes[2], []string{"read"}, `
print(read("a"))
print(read("b"))
`)
	// EOF on the response bell must not spin or fail the wait.
	require.NoError(t, run.bells.responseWrite.Close())
	for range 2 {
		req := run.host.next(t)
		run.host.answer(t, req.file, okResponse(req.file, "late"))
	}
	assert.Equal(t, "late\nlate\n", requireClean(t, run.proc.wait()))
}

func TestManyWaitersShareTheResponseBell(t *testing.T) {
	run := startBridgeRun(t, wakeModes[1], []string{"read"}, `
import json
print(json.dumps(batch([("read", {"path": str(i)}) for i in range(40)])))
`)
	var reqs []request
	for range 16 {
		reqs = append(reqs, run.host.next(t))
	}
	// Answer one at a time, newest first, each with its own ring, while
	// the pool's 16 threads wait together; later calls arrive as
	// threads free up.
	answered := 0
	for answered < 40 {
		req := reqs[len(reqs)-1]
		reqs = reqs[:len(reqs)-1]
		var params map[string]string
		require.NoError(t, json.Unmarshal(req.Params, &params))
		run.host.answer(t, req.file, okResponse(req.file, "r"+params["path"]))
		answered++
		if answered+len(reqs) < 40 {
			reqs = append(reqs, run.host.next(t))
		}
	}
	var got []string
	lastJSONLine(t, requireClean(t, run.proc.wait()), &got)
	require.Len(t, got, 40)
	for i, r := range got {
		assert.Equal(t, fmt.Sprintf("r%d", i), r)
	}
}

func TestBellsAreNotInheritedBySubprocesses(t *testing.T) {
	run := startBridgeRun(t, wakeModes[1], nil, `
import json, os, subprocess, sys
mine = {fd: [os.fstat(fd).st_dev, os.fstat(fd).st_ino] for fd in (3, 4)}
probe = (
    "import json, os\n"
    "out = {}\n"
    "for fd in (3, 4):\n"
    "    try:\n"
    "        st = os.fstat(fd)\n"
    "        out[fd] = [st.st_dev, st.st_ino]\n"
    "    except OSError:\n"
    "        out[fd] = None\n"
    "print(json.dumps(out))\n"
)
child = subprocess.run([sys.executable, "-c", probe], close_fds=False, capture_output=True, text=True, check=True)
print(json.dumps({
    "inheritable": [os.get_inheritable(3), os.get_inheritable(4)],
    "blocking": [os.get_blocking(3), os.get_blocking(4)],
    "mine": {str(k): v for k, v in mine.items()},
    "child": json.loads(child.stdout),
}))
`)
	var res struct {
		Inheritable []bool
		Blocking    []bool
		Mine        map[string][]uint64
		Child       map[string][]uint64
	}
	lastJSONLine(t, requireClean(t, run.proc.wait()), &res)
	assert.Equal(t, []bool{false, false}, res.Inheritable)
	assert.Equal(t, []bool{false, false}, res.Blocking)
	for _, fd := range []string{"3", "4"} {
		require.NotNil(t, res.Mine[fd])
		assert.NotEqual(t, res.Mine[fd], res.Child[fd], "the child holds the bell at fd %s", fd)
	}
}

func TestUnusableBellsFallBackToPolling(t *testing.T) {
	// Configured with bells but started without the descriptors.
	s := newStage(t, []string{"read"}, 0, childBells)
	host := startResponder(t, s.rpc, nil)
	p := s.start(t, `
import exec_tools
print(exec_tools._BRIDGE.bells)
print(read("a"))
`)
	req := host.next(t)
	host.answer(t, req.file, okResponse(req.file, "polled"))
	assert.Equal(t, "None\npolled\n", requireClean(t, p.wait()))
}

func TestConfigureRestartsRequestIDs(t *testing.T) {
	s := newUnconfiguredStage(t, []string{"read"}, 0)
	second := s.newRPCDir(t, "rpc-second")
	first := startResponder(t, s.rpc, nil)
	other := startResponder(t, second, nil)
	p := s.start(t, fmt.Sprintf(`
import exec_tools
exec_tools._configure(%q, "t1")
print(read("a"), read("b"))
exec_tools._configure(%q, "t2")
print(read("c"))
`, s.rpc, second))
	for _, want := range []int{1, 2} {
		req := first.next(t)
		assert.Equal(t, want, req.file)
		assert.Equal(t, "t1", req.Token)
		first.answer(t, req.file, okResponse(req.file, fmt.Sprint(want)))
	}
	req := other.next(t)
	assert.Equal(t, 1, req.file, "a new bridge starts at id 1")
	assert.Equal(t, "t2", req.Token)
	other.answer(t, req.file, okResponse(req.file, "fresh"))
	assert.Equal(t, "1 2\nfresh\n", requireClean(t, p.wait()))
}

func TestThreadFromAFinishedCellIsRefused(t *testing.T) {
	s := newUnconfiguredStage(t, []string{"read"}, 0)
	second := s.newRPCDir(t, "rpc-second")
	out := requireClean(t, s.run(t, fmt.Sprintf(`
import threading, exec_tools
exec_tools._configure(%q, "t1", None, 1)
go = threading.Event()
seen = []
def attempt(label, fn):
    try:
        fn()
        seen.append(label + ": allowed")
    except ToolError as e:
        seen.append(label + ": " + str(e))
def old_cell():
    go.wait()
    attempt("read", lambda: read("x"))
    attempt("text", lambda: text("x"))
    attempt("notify", lambda: notify("x"))
    attempt("batch", lambda: batch([("read", {"path": "x"})]))
worker = threading.Thread(target=old_cell)
worker._exec_gen = 1
worker.start()
exec_tools._configure(%q, "t2", None, 2)
go.set()
worker.join()
attempt("main", lambda: text("from the open cell"))
print("\n".join(seen))
`, s.rpc, second)))
	msg := "exec_tools bridge belongs to a finished cell"
	assert.Equal(t, strings.Join([]string{
		"read: " + msg, "text: " + msg, "notify: " + msg, "batch: " + msg,
		"main: allowed",
	}, "\n")+"\n", out)
}

func TestThreadOfTheOpenCellMayCallHelpers(t *testing.T) {
	s := newUnconfiguredStage(t, []string{"read"}, 0)
	host := startResponder(t, s.rpc, nil)
	p := s.start(t, fmt.Sprintf(`
import threading, exec_tools
exec_tools._configure(%q, %q, None, 2)
out = []
def cell():
    out.append(read("a"))
    out.extend(batch([("read", {"path": "b"}), ("read", {"path": "c"})]))
worker = threading.Thread(target=cell)
worker._exec_gen = 2
worker.start()
worker.join()
print(" ".join(out))
`, s.rpc, testToken))
	for range 3 {
		req := host.next(t)
		var params map[string]string
		require.NoError(t, json.Unmarshal(req.Params, &params))
		host.answer(t, req.file, okResponse(req.file, params["path"]))
	}
	assert.Equal(t, "a b c\n", requireClean(t, p.wait()))
}
