package shimpy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textFrame is a text-<n>.json body as the host decodes it.
type textFrame struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

func decodeText(t *testing.T, body []byte) textFrame {
	t.Helper()
	var f textFrame
	require.NoError(t, json.Unmarshal(body, &f), "frame %q", body)
	return f
}

func TestTextWritesTheExactFrame(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	requireClean(t, s.run(t, `text("0123456789")`))
	got := frames(t, s.rpc, "text")
	require.Len(t, got, 1)
	assert.Equal(t, `{"n": 1, "text": "0123456789"}`, string(got[0]))
	assert.Equal(t, []string{"text-1.json"}, withoutMACs(listDir(t, s.rpc)), "no temp file may remain")
	info, err := os.Stat(frameFile(t, s.rpc, "text-1.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestTextCoercesNonStrings(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	requireClean(t, s.run(t, `
text(None)
text(42)
text([1, "a"])
class Shout:
    def __str__(self):
        return "LOUD"
text(Shout())
`))
	var got []string
	for _, body := range frames(t, s.rpc, "text") {
		got = append(got, decodeText(t, body).Text)
	}
	assert.Equal(t, []string{"None", "42", "[1, 'a']", "LOUD"}, got)
}

func TestTextRefusesAnOverBudgetBlockAndKeepsEarlierOnes(t *testing.T) {
	s := newStage(t, nil, 64, nil)
	out := requireClean(t, s.run(t, `
import json, exec_tools
text("0123456789")
try:
    text("X" * 40)
except ToolError as e:
    print(json.dumps({"error": str(e), "text_bytes": exec_tools._BRIDGE.text_bytes}))
`))
	var res struct {
		Error     string `json:"error"`
		TextBytes int    `json:"text_bytes"`
	}
	lastJSONLine(t, out, &res)
	assert.Equal(t, "text() byte budget exceeded (30 bytes accumulated, 60 more requested, cap 64)", res.Error)
	assert.Equal(t, 30, res.TextBytes, "a refused block consumes nothing")
	assert.Equal(t, []string{"text-1.json"}, withoutMACs(listDir(t, s.rpc)))
}

func TestTextChargesEscapedNULsSixFold(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, `
import json
text("\0" * 8000)
try:
    text("\0" * 4000)
except ToolError as e:
    print(json.dumps({"error": str(e)}))
`))
	var res struct{ Error string }
	lastJSONLine(t, out, &res)
	assert.Equal(t, "text() byte budget exceeded (48020 bytes accumulated, 24020 more requested, cap 65536)", res.Error)
	got := frames(t, s.rpc, "text")
	require.Len(t, got, 1)
	assert.Len(t, got[0], 48020)
	assert.Equal(t, strings.Repeat("\x00", 8000), decodeText(t, got[0]).Text)
}

func TestTextRefusesASingleBlockOverTheBudgetWithoutWritingIt(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, `
try:
    text("\0" * 11000)
except ToolError as e:
    print(e)
`))
	assert.Contains(t, out, "text() byte budget exceeded (0 bytes accumulated, 66020 more requested, cap 65536)")
	assert.Empty(t, listDir(t, s.rpc))
}

func TestTextFramesAreValidJSONAndSumToTheShimsCharge(t *testing.T) {
	// Python literal → what the host must read back (surrogates become
	// U+FFFD one code point at a time).
	corpus := []struct{ python, want string }{
		{`"plain"`, "plain"},
		{`"\ud800"`, "\ufffd"},
		{`"a\udfffb"`, "a\ufffdb"},
		{`"\ud83d\ude00"`, "\ufffd\ufffd"},
		{`"\U0001F600 emoji"`, "\U0001F600 emoji"},
		{`"mixed \ud800 and \U0001F600 and \udc00"`, "mixed \ufffd and \U0001F600 and \ufffd"},
		{`"".join(chr(c) for c in range(32)) + "\x7f"`, func() string {
			var b strings.Builder
			for c := range 32 {
				b.WriteByte(byte(c))
			}
			return b.String() + "\x7f"
		}()},
		{`"line\u2028sep\u2029para"`, "line\u2028sep\u2029para"},
		{`"quote \" backslash \\ slash /"`, "quote \" backslash \\ slash /"},
		{`"é ü 中文 \ufffd"`, "é ü 中文 \ufffd"},
		{`""`, ""},
		{`"\0" * 300`, strings.Repeat("\x00", 300)},
	}
	var script strings.Builder
	script.WriteString("import json, exec_tools\n")
	for _, c := range corpus {
		fmt.Fprintf(&script, "text(%s)\n", c.python)
	}
	script.WriteString(`
try:
    text("y" * 64000)
    refused = False
except ToolError:
    refused = True
print(json.dumps({"text_bytes": exec_tools._BRIDGE.text_bytes, "refused": refused}))
`)
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, script.String()))
	var res struct {
		TextBytes int  `json:"text_bytes"`
		Refused   bool `json:"refused"`
	}
	lastJSONLine(t, out, &res)
	assert.True(t, res.Refused, "a 64,000-char block cannot fit after the corpus")

	got := frames(t, s.rpc, "text")
	require.Equal(t, len(corpus), len(got), "frame count")
	sum := 0
	for i, body := range got {
		sum += len(body)
		assertNoLoneSurrogateEscape(t, body)
		f := decodeText(t, body)
		assert.Equal(t, i+1, f.N)
		assert.Equal(t, corpus[i].want, f.Text, "corpus %s", corpus[i].python)
	}
	assert.Equal(t, res.TextBytes, sum)
}

var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// assertNoLoneSurrogateEscape fails when the frame holds a \uD8xx–\uDFxx
// escape that is not half of a proper pair: Go's decoder would silently
// turn it into U+FFFD, so decoding alone cannot prove the shim normalised.
func assertNoLoneSurrogateEscape(t *testing.T, body []byte) {
	t.Helper()
	locs := surrogateEscape.FindAllIndex(body, -1)
	for i := 0; i < len(locs); i++ {
		hi := strings.ToLower(string(body[locs[i][0]+2 : locs[i][0]+3]))
		if hi != "d" {
			continue
		}
		first := strings.ToLower(string(body[locs[i][0]+3]))
		isHigh := strings.Contains("89ab", first)
		if isHigh && i+1 < len(locs) && locs[i+1][0] == locs[i][1] &&
			strings.Contains("cdef", strings.ToLower(string(body[locs[i+1][0]+3]))) {
			i++
			continue
		}
		t.Fatalf("lone surrogate escape in frame %q", body)
	}
}

func TestTextFromManyThreadsNumbersEveryBlockOnce(t *testing.T) {
	s := newStage(t, nil, 1<<20, nil)
	out := requireClean(t, s.run(t, `
import json, threading, exec_tools
def worker(k):
    for i in range(50):
        text("w%d-%d" % (k, i))
threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
for th in threads: th.start()
for th in threads: th.join()
print(json.dumps({"text_bytes": exec_tools._BRIDGE.text_bytes}))
`))
	var res struct {
		TextBytes int `json:"text_bytes"`
	}
	lastJSONLine(t, out, &res)
	got := frames(t, s.rpc, "text")
	require.Equal(t, 400, len(got), "frame count")
	seen := map[string]bool{}
	sum := 0
	for i, body := range got {
		f := decodeText(t, body)
		assert.Equal(t, i+1, f.N)
		assert.False(t, seen[f.Text], "duplicate block %q", f.Text)
		seen[f.Text] = true
		sum += len(body)
	}
	assert.Equal(t, res.TextBytes, sum)
}

func TestConfigureInstallsAFreshBudgetAndNumbering(t *testing.T) {
	s := newUnconfiguredStage(t, nil, 64)
	second := s.newRPCDir(t, "rpc-second")
	out := requireClean(t, s.run(t, fmt.Sprintf(`
import json, exec_tools
exec_tools._configure(%q, "t1")
text("0123456789")
try:
    text("X" * 40)
    first_refused = False
except ToolError:
    first_refused = True
exec_tools._configure(%q, "t2")
text("X" * 40)
b = exec_tools._BRIDGE
print(json.dumps({"first_refused": first_refused, "text_bytes": b.text_bytes, "budget": b.budget, "seq": b.seq}))
`, s.rpc, second)))
	var res struct {
		FirstRefused bool `json:"first_refused"`
		TextBytes    int  `json:"text_bytes"`
		Budget       int  `json:"budget"`
		Seq          int  `json:"seq"`
	}
	lastJSONLine(t, out, &res)
	assert.True(t, res.FirstRefused)
	assert.Equal(t, 60, res.TextBytes)
	assert.Equal(t, 64, res.Budget)
	assert.Equal(t, []string{"text-1.json"}, withoutMACs(listDir(t, s.rpc)))
	assert.Equal(t, []string{"text-1.json"}, withoutMACs(listDir(t, second)), "numbering restarts at 1")
}

func TestConfigureFallsBackToTheRenderedBudget(t *testing.T) {
	s := newUnconfiguredStage(t, nil, 77)
	out := requireClean(t, s.run(t, fmt.Sprintf(`
import json, exec_tools
budgets = []
for b in (None, 0, -1, True, 1.5, "100", 100):
    exec_tools._configure(%q, "t", b)
    budgets.append(exec_tools._BRIDGE.budget)
print(json.dumps(budgets))
`, s.rpc)))
	var budgets []any
	lastJSONLine(t, out, &budgets)
	assert.Equal(t, []any{77.0, 77.0, 77.0, 77.0, 77.0, 77.0, 100.0}, budgets)
}

func TestNotifyWritesNumberedFrames(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	requireClean(t, s.run(t, `
notify("started")
notify(None)
notify(3.5)
notify("bad \ud800 half")
notify("x" * 10000)
`))
	type notifyFrame struct {
		N   int    `json:"n"`
		Msg string `json:"msg"`
	}
	want := []string{"started", "", "3.5", "bad \ufffd half", strings.Repeat("x", 10000)}
	got := frames(t, s.rpc, "notify")
	require.Len(t, got, len(want))
	for i, body := range got {
		assertNoLoneSurrogateEscape(t, body)
		var f notifyFrame
		require.NoError(t, json.Unmarshal(body, &f))
		assert.Equal(t, notifyFrame{N: i + 1, Msg: want[i]}, f)
	}
	assert.Len(t, listDir(t, s.rpc), len(want), "no temp files remain")
}

func TestChannelsRefuseAnUnconfiguredModule(t *testing.T) {
	s := newUnconfiguredStage(t, []string{"read"}, 0)
	out := requireClean(t, s.run(t, `
for f in (lambda: text("a"), lambda: notify("a"), lambda: read("a"), lambda: batch([("read", {"path": "a"})])):
    try:
        f()
        print("no error")
    except ToolError as e:
        print(e)
`))
	assert.Equal(t, strings.Repeat("exec_tools is not configured for this cell\n", 4), out)
	assert.Empty(t, listDir(t, s.rpc))
}

// Frames are encoded without importing json; they must be byte-for-byte
// what json.dumps would write, or the two sides' budgets would differ.
func TestFramesAreExactlyWhatJSONDumpsWrites(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, `
import json, sys, exec_tools
corpus = ["", "plain", "\0" * 5, "\ud800", "a\udc00b", "\U0001F600", "\u2028\u2029", "\x7f\x01\t\n\r\"\\/", "é" * 3, "x" * 70000]
bad = [c for c in corpus if exec_tools._frame("text", 7, c) != json.dumps({"n": 7, "text": c})]
print(len(bad))
`))
	assert.Equal(t, "0\n", out)
}

func TestImportingTheShimLoadsNeitherJSONNorThreading(t *testing.T) {
	s := newStage(t, nil, 0, nil)
	out := requireClean(t, s.run(t, `
import sys
text("hi")
notify("n")
print(sorted(m for m in ("json", "concurrent.futures", "re", "threading") if m in sys.modules))
`))
	assert.Equal(t, "[]\n", out)
}
