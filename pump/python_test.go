package pump

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/internal/proctest"
)

// shimLike speaks the bridge protocol the way the shim does, written
// independently with python's own hmac module: publish by temp file and
// rename under an authenticated name, ring fd 3, wait on fd 4 with a slow
// fallback, and believe only an authenticated response.
const shimLike = `
import hmac, json, os, select, sys
d, token = sys.argv[1], sys.argv[2]
for fd in (3, 4):
    os.set_inheritable(fd, False)
    os.set_blocking(fd, False)

def mac(kind, num, body):
    msg = kind.encode() + b"\0" + str(num).encode() + b"\0" + body
    return hmac.new(token.encode(), msg, "sha256").hexdigest()[:32]

def publish(kind, num, payload):
    body = json.dumps(payload).encode()
    name = "%s-%d-%s.json" % (kind, num, mac(kind, num, body))
    tmp = os.path.join(d, name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(body)
    os.replace(tmp, os.path.join(d, name))
    try:
        os.write(3, b"\x01")
    except (BlockingIOError, BrokenPipeError, OSError):
        pass

def call(i, tool, params):
    publish("req", i, {"id": i, "tool": tool, "params": params})
    res = os.path.join(d, "res-%d.json" % i)
    while not os.path.exists(res):
        select.select([4], [], [], 0.1)
        try:
            while os.read(4, 4096):
                pass
        except BlockingIOError:
            pass
    with open(res, "rb") as f:
        data = f.read()
    assert data.startswith(b'{"mac":"') and data[40:42] == b'",', data
    body = b"{" + data[42:]
    assert hmac.compare_digest(data[8:40].decode(), mac("res", i, body)), data
    r = json.loads(body)
    if not r["ok"]:
        return "error: " + r["error"]
    return r["content"]

out = []
for i in range(1, 4):
    out.append(call(i, "read", {"text": "hello %d \u00e9\U0001f600" % i}))
out.append(call(4, "bash", {}))
publish("notify", 1, {"n": 1, "msg": "done"})
print(json.dumps(out))
`

// startShimLike starts python on shimLike over h's directory with b's
// child ends, which it then closes on the host's side.
func startShimLike(ctx context.Context, t *testing.T, python string, h *harness, b *bell.Pair) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", shimLike, h.dir, h.token)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = b.ChildFiles()
	cmd.WaitDelay = time.Second
	require.NoError(t, cmd.Start())
	require.NoError(t, b.CloseChildEnds())
	return cmd, &stdout, &stderr
}

func TestRunSpeaksTheBridgeWithARealPython(t *testing.T) {
	python := proctest.Python(t)
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour // progress only through the doorbells
	got := h.collect()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, stdout, stderr := startShimLike(ctx, t, python, h, b)
	exited := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		waited <- cmd.Wait()
		close(exited)
	}()

	stats := h.runToEnd(ctx, exited)
	require.NoError(t, <-waited, "python stderr: %s", stderr.String())

	var out []string
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	assert.Equal(t, []string{
		"hello 1 é😀", "hello 2 é😀", "hello 3 é😀",
		"error: tool 'bash' is not available inside execute_code scripts",
	}, out)
	assert.Equal(t, 4, stats.Calls)
	assert.Equal(t, 1, stats.Errors)
	assert.Equal(t, []string{"done"}, *got)
}

// textWriter writes text() frames the way the shim does (surrogates made
// U+FFFD first, json.dump with its defaults) and prints what it wrote and
// how many bytes it charged.
const textWriter = `
import hmac, json, os, sys
d, token = sys.argv[1], sys.argv[2]
def safe(s):
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)
corpus = ["\ud800 lone", "pair \ud83d\ude00 as two", "\x00\x01\x1f ctl", "emoji \U0001f389",
          "sep \u2028 \u2029", "quote \" back \\", "\u00e9\u4e2d", "", "x" * 1000]
sent, used = [], 0
for n, s in enumerate(corpus, 1):
    s = safe(s)
    frame = {"n": n, "text": s}
    body = json.dumps(frame).encode()
    used += len(body)
    tag = hmac.new(token.encode(), b"text\0%d\0" % n + body, "sha256").hexdigest()[:32]
    with open(os.path.join(d, "text-%d-%s.json" % (n, tag)), "wb") as f:
        f.write(body)
    sent.append(s)
print(json.dumps({"sent": sent, "used": used}))
`

func TestReadTextBlocksReturnsExactlyWhatPythonWrote(t *testing.T) {
	python := proctest.Python(t)
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", textWriter, h.dir, h.token).Output()
	require.NoError(t, err)
	var want struct {
		Sent []string
		Used int
	}
	require.NoError(t, json.Unmarshal(out, &want))

	refused := 0
	count := func() { refused++ }
	assert.Equal(t, want.Sent, ReadTextBlocks(h.dir, h.token, 65536, count))
	assert.Equal(t, want.Sent, ReadTextBlocks(h.dir, h.token, want.Used, count), "the host charges exactly the shim's bytes")
	assert.Equal(t, want.Sent[:len(want.Sent)-1], ReadTextBlocks(h.dir, h.token, want.Used-1, count))
	assert.Zero(t, refused, "python's hmac and the pump agree on every MAC")
}

func TestServerSpeaksTheBridgeWithARealPython(t *testing.T) {
	python := proctest.Python(t)
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = time.Hour // progress only through the doorbells
	notes := h.collectNotes()
	srv := h.start()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, stdout, stderr := startShimLike(ctx, t, python, h, b)
	require.NoError(t, cmd.Wait(), "python stderr: %s", stderr.String())

	// The cell has ended: abort, then the teardown read.
	srv.Abort(ctx)
	stats, err := srv.DrainAndStats(ctx)
	require.NoError(t, err)

	var out []string
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	assert.Equal(t, []string{
		"hello 1 é😀", "hello 2 é😀", "hello 3 é😀",
		"error: tool 'bash' is not available inside execute_code scripts",
	}, out)
	assert.Equal(t, 4, stats.Calls)
	assert.Equal(t, 1, stats.Errors)
	assert.False(t, stats.AccountingLoss)
	assert.Equal(t, []string{"done"}, notes(), "the last notification is forwarded by the drain")
}
