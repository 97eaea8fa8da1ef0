package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// rawRPC is a prelude for hostile scripts that speak the file protocol
// directly instead of through the helpers, with the token a script can
// always read from its own shim and python's own hmac: mac(kind, num,
// data) authenticates a file; raw(id, body) publishes any bytes as id's
// request, named with their MAC under key (the run's token by default,
// False for no MAC at all); answer(id) waits for an authenticated
// res-<id>.json and returns it without its MAC member, or for the one
// answer that carries none, the refusal of an unauthenticated request.
const rawRPC = `
import hmac, json, os, time, exec_tools
B = exec_tools._BRIDGE
D, TOKEN = B.dir, B.token
def mac(kind, num, data, key=None):
    msg = ("%s\0%s\0" % (kind, num)).encode() + data
    return hmac.new((TOKEN if key is None else key).encode(), msg, "sha256").hexdigest()[:32]
def raw(i, body, key=None):
    data = (body if isinstance(body, str) else json.dumps(body)).encode()
    name = "req-%s.json" % i if key is False else "req-%s-%s.json" % (i, mac("req", i, data, key))
    p = os.path.join(D, name)
    with open(p + ".x", "wb") as f:
        f.write(data)
    os.replace(p + ".x", p)
    return name
def req(i, tool="read", params=None, key=None):
    return raw(i, {"id": i, "tool": tool, "params": params or {"path": "a.txt"}}, key)
def answer(i, timeout=10):
    p = os.path.join(D, "res-%s.json" % i)
    end = time.time() + timeout
    while time.time() < end:
        if os.path.lexists(p) and os.path.isfile(p) and not os.path.islink(p):
            data = open(p, "rb").read()
            body = b"{" + data[42:]
            if data.startswith(b'{"mac":"') and hmac.compare_digest(data[8:40].decode(), mac("res", i, body)):
                return json.loads(body)
            refusal = {"id": i, "ok": False, "error": "rpc authentication failed"}
            if data == json.dumps(refusal, separators=(",", ":")).encode():
                return refusal
        time.sleep(0.005)
    return None
def result(x):
    text(json.dumps(x, sort_keys=True))
`

func hostile(t *testing.T, opts ...envOption) (*env, *countingTool) {
	ct := &countingTool{name: "read"}
	opts = append([]envOption{withTools(map[string]tools.Tool{"read": ct})}, opts...)
	return newEnv(t, map[string]string{"a.txt": "a"}, opts...), ct
}

func decodeBlock(t *testing.T, block string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(block), &v), block)
	return v
}

func TestForgedTokensAreRefusedAndNeverRunTheTool(t *testing.T) {
	e, ct := hostile(t)
	res := e.run(rawRPC + `
forged = TOKEN[:-1] + ("A" if TOKEN[-1] != "A" else "B")
call = {"tool": "read", "params": {}}
bodies = [
    (call, forged),
    (call, TOKEN + "x"),
    (call, False),
    (dict(call, token=None), False),
    (dict(call, token=12345), False),
    (dict(call, token=TOKEN), False),
    ("{not json", False),
    ("", False),
    ("[1, 2]", False),
    ('"str"', False),
]
out = []
for i, (b, key) in enumerate(bodies, 1):
    raw(i, b, key)
    out.append(answer(i))
result(out)
`)
	require.Len(t, res.Blocks, 1)
	answers := decodeBlock(t, res.Blocks[0]).([]any)
	require.Len(t, answers, 10)
	for i, a := range answers {
		assert.Equal(t, map[string]any{"id": float64(i + 1), "ok": false, "error": "rpc authentication failed"}, a, "request %d", i+1)
	}
	assert.Equal(t, 10, res.Details.RPCDenied)
	assert.Equal(t, 0, res.Details.RPCCalls)
	assert.Equal(t, 0, res.Details.RPCErrors)
	assert.Equal(t, int64(0), ct.calls.Load())
}

func TestAuthenticatedButMalformedRequestsSpendACall(t *testing.T) {
	e, ct := hostile(t)
	res := e.run(rawRPC + `
raw(1, {"id": 1, "tool": 5, "params": {}})
raw(2, {"id": 2, "tool": "read", "params": [1]})
raw(3, {"id": 3, "tool": "read", "params": "x"})
for tool in ["bash", "write", "edit", "patch", "agent", "execute_code"]:
    pass
req(4, tool="bash")
req(5, tool="execute_code")
result([answer(i)["error"] for i in range(1, 6)])
`)
	assert.Equal(t, []any{"invalid rpc request", "invalid rpc request", "invalid rpc request",
		"tool 'bash' is not available inside execute_code scripts",
		"tool 'execute_code' is not available inside execute_code scripts"}, decodeBlock(t, res.Blocks[0]))
	assert.Equal(t, 5, res.Details.RPCCalls)
	assert.Equal(t, 5, res.Details.RPCErrors)
	assert.Equal(t, int64(0), ct.calls.Load())
}

func TestReplayedRequestIDIsRefused(t *testing.T) {
	e, ct := hostile(t)
	res := e.run(rawRPC + `
req(1)
first = answer(1)
os.unlink(os.path.join(D, "res-1.json"))
req(1)
result([first["ok"], answer(1)])
`)
	assert.Equal(t, []any{true, map[string]any{"id": 1.0, "ok": false, "error": "rpc request already processed"}}, decodeBlock(t, res.Blocks[0]))
	assert.Equal(t, 1, res.Details.RPCCalls)
	assert.Equal(t, 1, res.Details.RPCErrors)
	assert.Equal(t, int64(1), ct.calls.Load())
}

func TestNegativeIDsAnswerInPlaceAndBadNamesAreDropped(t *testing.T) {
	e, _ := hostile(t)
	res := e.run(rawRPC + `
req(-3)
bad = raw("abc", {"tool": "read", "params": {}})
a = answer(-3)
time.sleep(0.3)
result([a["ok"], os.path.exists(os.path.join(D, bad)), os.path.exists(os.path.join(D, "res-abc.json"))])
`)
	assert.Equal(t, []any{true, false, false}, decodeBlock(t, res.Blocks[0]))
}

func TestPlantedSymlinkAtResponseIsReplacedAndItsTargetUntouched(t *testing.T) {
	e, _ := hostile(t)
	victim := filepath.Join(t.TempDir(), "victim.txt")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	res := e.run(rawRPC + fmt.Sprintf(`
os.symlink(%q, os.path.join(D, "res-1.json"))
req(1)
p = os.path.join(D, "res-1.json")
end = time.time() + 10
while time.time() < end and os.path.islink(p):
    time.sleep(0.005)
st = os.lstat(p)
import stat
result([stat.S_ISREG(st.st_mode), oct(st.st_mode & 0o777), json.load(open(p))["ok"]])
`, victim))
	assert.Equal(t, []any{true, "0o600", true}, decodeBlock(t, res.Blocks[0]))
	body, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(body))
}

func TestPlantedDirectoryAtClaimMarkerStopsTheDispatch(t *testing.T) {
	e, ct := hostile(t)
	res := e.run(rawRPC + `
os.mkdir(os.path.join(D, "req-1.claim"))
req(1)
result([answer(1), os.path.isdir(os.path.join(D, "req-1.claim"))])
`)
	assert.Equal(t, []any{map[string]any{"id": 1.0, "ok": false, "error": "rpc dispatch could not be marked in-flight"}, true}, decodeBlock(t, res.Blocks[0]))
	assert.Equal(t, 1, res.Details.RPCCalls)
	assert.Equal(t, 1, res.Details.RPCErrors)
	assert.Equal(t, int64(0), ct.calls.Load())
}

func TestSymlinkedRequestIsNeverDispatched(t *testing.T) {
	e, ct := hostile(t)
	res := e.run(rawRPC + `
src = os.path.join(os.path.dirname(D), "elsewhere.json")
data = json.dumps({"id": 1, "tool": "read", "params": {"path": "a.txt"}}).encode()
with open(src, "wb") as f:
    f.write(data)
os.symlink(src, os.path.join(D, "req-1-%s.json" % mac("req", 1, data)))
a = answer(1)
time.sleep(0.2)
result([a, sorted(n for n in os.listdir(D) if n.startswith("req-"))])
`)
	assert.Equal(t, []any{map[string]any{"id": 1.0, "ok": false, "error": "rpc dispatch could not be marked in-flight"}, []any{}}, decodeBlock(t, res.Blocks[0]))
	assert.Equal(t, int64(0), ct.calls.Load())
}

func TestRequestFloodPastTheCallBudgetAnswersEveryRequest(t *testing.T) {
	e, ct := hostile(t, withConfig(func(c *config.Config) { c.MaxRPCCalls = 3 }))
	res := e.run(rawRPC + `
for i in range(1, 201):
    req(i)
answers = [answer(i) for i in range(1, 201)]
ok = [i for i, a in enumerate(answers, 1) if a and a["ok"]]
errs = set(a["error"] for a in answers if a and not a["ok"])
result([ok, sorted(errs), sum(1 for a in answers if a is None)])
`)
	assert.Equal(t, []any{[]any{1.0, 2.0, 3.0}, []any{"rpc call limit exceeded (max 3 calls per script)"}, 0.0}, decodeBlock(t, res.Blocks[0]))
	assert.Equal(t, 3, res.Details.RPCCalls)
	assert.Equal(t, 197, res.Details.RPCErrors)
	assert.Equal(t, int64(3), ct.calls.Load())
}

func TestBatchCrossingTheCallBudgetRaisesAfterWaitingAll(t *testing.T) {
	e, _ := hostile(t, withConfig(func(c *config.Config) { c.MaxRPCCalls = 2 }))
	res := e.run(`
try:
    batch([("read", {"path": "a.txt"})] * 3)
except ToolError as e:
    text(str(e))
`)
	assert.Equal(t, []string{"rpc call limit exceeded (max 2 calls per script)"}, res.Blocks)
	assert.Equal(t, 2, res.Details.RPCCalls)
	assert.Equal(t, 1, res.Details.RPCErrors)
}

func TestResultByteBudgetIsSpentExactly(t *testing.T) {
	rr := &rawRead{}
	e := newEnv(t, map[string]string{"sixty.txt": strings.Repeat("x", 59) + "\n", "forty.txt": strings.Repeat("y", 39) + "\n"},
		withConfig(func(c *config.Config) { c.MaxRPCResultBytes = 100 }),
		withTools(map[string]tools.Tool{"read": rr}))
	rr.root = e.root
	res := e.run(`
out = []
for p in ["sixty.txt", "sixty.txt", "forty.txt", "forty.txt"]:
    try:
        out.append(len(read(p)))
    except ToolError as e:
        out.append(str(e))
text(repr(out))
`)
	assert.Equal(t, []string{"[60, 'rpc result byte budget exceeded (result 60 bytes, 40 bytes remaining of 100)', 40, 'rpc result byte budget exceeded (result 40 bytes, 0 bytes remaining of 100)']"}, res.Blocks)
	assert.Equal(t, int64(100), res.Details.RPCBytes)
	assert.Equal(t, 2, res.Details.RPCErrors)
}

func TestTextBudgetChargesTheEncodedFrame(t *testing.T) {
	t.Run("small cap", func(t *testing.T) {
		e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MaxTextBytes = 64 }))
		res := e.run("text('0123456789')\ntry:\n    text('X' * 40)\nexcept ToolError as e:\n    print(e)\n")
		assert.Equal(t, []string{"0123456789"}, res.Blocks)
		assert.Contains(t, res.Text(), "text() byte budget exceeded")
		assert.Contains(t, res.Text(), "cap 64")
		assert.Less(t, strings.Index(res.Text(), "0123456789"), strings.Index(res.Text(), "Diagnostics"))
	})
	t.Run("NUL six-fold", func(t *testing.T) {
		e := newEnv(t, nil)
		res := e.run("text('\\0' * 8000)\ntry:\n    text('\\0' * 4000)\nexcept ToolError as e:\n    print(e)\n")
		require.Len(t, res.Blocks, 1)
		assert.Equal(t, strings.Repeat("\x00", 8000), res.Blocks[0])
		assert.Contains(t, res.Text(), "48020 bytes accumulated")
	})
	t.Run("refused alone", func(t *testing.T) {
		e := newEnv(t, nil)
		res := e.run("try:\n    text('\\0' * 11000)\nexcept ToolError:\n    print('refused')\n")
		assert.Empty(t, res.Blocks)
		assert.NotContains(t, res.Text(), "Script result (text()):")
		assert.Equal(t, 0, *res.Details.ExitCode)
	})
	t.Run("surrogates and odd characters", func(t *testing.T) {
		e := newEnv(t, nil)
		res := e.run("for s in ['\\ud800', 'a\\udc00b', '\\ud83d\\ude00', '😀', '\\u2028', '\\x01\\x7f', None, 42]:\n    text(s)\n")
		assert.Equal(t, []string{"\uFFFD", "a\uFFFDb", "\uFFFD\uFFFD", "😀", "\u2028", "\x01\x7f", "None", "42"}, res.Blocks)
	})
}

func TestPlantedTextBlocksAreSkippedSafely(t *testing.T) {
	e := newEnv(t, nil)
	victim := filepath.Join(t.TempDir(), "victim.json")
	require.NoError(t, os.WriteFile(victim, []byte(`{"n": 5, "text": "from a link"}`), 0o644))
	res := e.run(rawRPC + fmt.Sprintf(`
text("real")
linked = open(%[1]q, "rb").read()
os.symlink(%[1]q, os.path.join(D, "text-5-%%s.json" %% mac("text", 5, linked)))
huge = json.dumps({"n": 6, "text": "x" * (5 << 20)}).encode()
with open(os.path.join(D, "text-6-%%s.json" %% mac("text", 6, huge)), "wb") as f:
    f.write(huge)
`, victim))
	assert.Equal(t, []string{"real"}, res.Blocks)
}

// rawRead returns a file's bytes exactly, so byte budgets are predictable.
type rawRead struct{ root string }

func (*rawRead) Name() string { return "read" }
func (r *rawRead) Execute(_ context.Context, p map[string]any) (tools.Result, error) {
	name, _ := p["path"].(string)
	b, err := os.ReadFile(filepath.Join(r.root, name))
	return tools.TextResult(string(b)), err
}
