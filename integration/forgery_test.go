package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/telemetry"
)

// victimScript is run B: a block and a notification, then it waits while
// another run plants files into its rpc directory, then two helper calls
// whose responses were planted before it made them, a block of their
// answers and a last notification.
const victimScript = `
import os, time
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

// attackScript is run A: it lists the staging root every run shares,
// finds the other run's rpc directory and plants what it can construct
// there: frames without a MAC, frames under its own token, the other
// run's genuine text frames copied under other numbers and as
// notifications, exception records saying MemoryError, and forged
// responses to the calls the other run is about to make. Its block
// counts the frames the host reads and must refuse.
const attackScript = `
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
counts = {"text": 0, "notify": 0, "exception": 0}
def put(name, data):
    tmp = os.path.join(v, "." + name + ".x")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(v, name))
    kind = name.split("-")[0].split(".")[0]
    if kind in counts:
        counts[kind] += 1
def mine(kind, num, data):
    return "%s-%s-%s.json" % (kind, num, me.mac(kind.encode(), num.encode(), data))
forged = b'{"n": 99, "text": "FORGED"}'
put("text-99.json", forged)
put(mine("text", "98", forged), forged)
for name in sorted(os.listdir(v)):
    m = re.match(r"text-(\d+)-([0-9a-f]{32})\.json$", name)
    if m:
        data = open(os.path.join(v, name), "rb").read()
        put("text-%d-%s.json" % (int(m.group(1)) + 50, m.group(2)), data)
        put("notify-%d-%s.json" % (int(m.group(1)) + 50, m.group(2)), data)
note = b'{"n": 1, "msg": "FORGED"}'
put("notify-1.json", note)
put(mine("notify", "97", note), note)
record = b'{"type": "MemoryError", "errno": null}'
put("exception.json", record)
put("exception-%s.json" % me.mac(b"exception", b"", record), record)
for i in (1, 2):
    body = b'{"id":%d,"ok":true,"content":"FORGED"}' % i
    put("res-%d.json" % i, body)
open("planted", "w").close()
text(json.dumps(counts))
`

// forgeryRun is one of the two concurrent runs: its result and what its
// notify callback received.
type forgeryRun struct {
	res   executecode.Result
	notes []string
}

// runAttack runs the victim and, once it waits, the attacker, side by side
// on one runtime; owners nil runs them per call.
func runAttack(t *testing.T, e *env, victim, attacker *executecode.Owner) (b, a forgeryRun) {
	t.Helper()
	var wg sync.WaitGroup
	run := func(out *forgeryRun, o *executecode.Owner, script string) {
		defer wg.Done()
		var mu sync.Mutex
		res, err := e.rt.Execute(context.Background(), executecode.Call{
			Script: script, Owner: o, TimeoutMS: 90000,
			Notify: func(m string) { mu.Lock(); out.notes = append(out.notes, m); mu.Unlock() },
		})
		assert.NoError(t, err)
		out.res = res
	}
	wg.Add(2)
	go run(&b, victim, victimScript)
	go run(&a, attacker, attackScript)
	wg.Wait()
	return b, a
}

func deniedCount(rec *telemetry.Recorder) int {
	n := 0
	for _, ev := range rec.Events() {
		if _, ok := ev.(telemetry.BridgeDeny); ok {
			n++
		}
	}
	return n
}

// assertUntouched checks B's result is what it would have been alone.
func assertUntouched(t *testing.T, b forgeryRun) {
	t.Helper()
	line := "     1\talpha"
	assert.Equal(t, []string{"b-real", line + "|" + line}, b.res.Blocks)
	assert.Equal(t, []string{"b-note", "b-done"}, b.notes)
	assert.NotContains(t, b.res.Text(), "FORGED")
	assert.NotContains(t, b.res.Text(), "Script killed")
	assert.Equal(t, executecode.Trusted, b.res.Trust)
	assert.Empty(t, b.res.Details.KilledBy)
	assert.Equal(t, 2, b.res.Details.RPCCalls)
	assert.Zero(t, b.res.Details.RPCDenied)
	assert.Zero(t, b.res.Details.RPCErrors)
	assert.Equal(t, int64(2*len(line)), b.res.Details.RPCBytes)
}

func plantedCounts(t *testing.T, a forgeryRun) map[string]int {
	t.Helper()
	require.Len(t, a.res.Blocks, 1, a.res.Text())
	var counts map[string]int
	require.NoError(t, json.Unmarshal([]byte(a.res.Blocks[0]), &counts))
	require.Positive(t, counts["text"])
	require.Positive(t, counts["notify"])
	return counts
}

// Issue 10 item 7: all sessions share one staging root, and a cell of
// one session could plant blocks into another session's bridge. Now
// nothing it can construct shows in the other session's result, which is
// exactly what it would have been, and every planted frame the host read
// is refused and counted as a bridge denial.
func TestASessionCannotForgeAnotherSessionsResult(t *testing.T) {
	rec := &telemetry.Recorder{}
	bus := &telemetry.Bus{}
	bus.Subscribe(rec)
	e := sessionEnv(t, map[string]string{"a.txt": "alpha\n"}, withRuntimeOption(executecode.WithTelemetry(bus)))
	b, a := runAttack(t, e, e.attach("victim"), e.attach("attacker"))

	counts := plantedCounts(t, a)
	assertUntouched(t, b)
	assert.True(t, boolp(b.res.Details.StateRetained))
	assert.False(t, b.res.Details.RPCAccountingLoss)
	// A session's exception comes over its control channel, so the
	// planted records are never read.
	assert.Equal(t, counts["text"]+counts["notify"], deniedCount(rec))
}

func TestAPerCallRunCannotForgeAnotherRunsResultOrHeadline(t *testing.T) {
	rec := &telemetry.Recorder{}
	bus := &telemetry.Bus{}
	bus.Subscribe(rec)
	e := newEnv(t, map[string]string{"a.txt": "alpha\n"},
		withConfig(func(c *config.Config) { c.MemoryLimitMB = 4096 }),
		withRuntimeOption(executecode.WithTelemetry(bus)))
	b, a := runAttack(t, e, nil, nil)

	counts := plantedCounts(t, a)
	assertUntouched(t, b)
	require.NotNil(t, b.res.Details.ExitCode)
	assert.Equal(t, 0, *b.res.Details.ExitCode)
	assert.True(t, strings.HasPrefix(b.res.Text(), "Script result (text()):"), "no headline: %s", b.res.Text())
	assert.Equal(t, counts["text"]+counts["notify"]+counts["exception"], deniedCount(rec))
}

// tokenSearch defines token_found(tops): where the run's bridge token
// shows up, in the files under tops, /proc/self's environ and cmdline,
// or os.environ.
const tokenSearch = `
import os, exec_tools
def token_found(tops):
    token = exec_tools._BRIDGE.token.encode()
    found = []
    for top in tops:
        for dirpath, _, files in os.walk(top):
            for name in files:
                with open(os.path.join(dirpath, name), "rb") as f:
                    if token in f.read():
                        found.append(name)
    for name in ("environ", "cmdline"):
        with open("/proc/self/" + name, "rb") as f:
            if token in f.read():
                found.append(name)
    if any(token.decode() in v for v in os.environ.values()):
        found.append("os.environ")
    return found
`

// A script finds its token in no file of its workspace, not in its
// environment and not in /proc/self, yet its helpers work.
func TestAPerCallScriptFindsItsTokenInNoFileOrEnvironment(t *testing.T) {
	e := newEnv(t, map[string]string{"a.txt": "alpha\n"})
	res := e.run(tokenSearch + `
found = token_found([os.path.dirname(os.path.abspath(exec_tools.__file__))])
text(repr(found))
text(read("a.txt"))
`)
	assert.Equal(t, []string{"[]", "     1\talpha"}, res.Blocks)
	assert.Equal(t, 1, res.Details.RPCCalls)
}

// The script itself holds its token (it is not secret from code in the
// same interpreter) and can write frames the shim's own counter never
// saw: the host's budget, which charges each file body, still holds to
// the byte.
func TestAScriptForgingItsOwnFramesStillMeetsTheHostsTextBudget(t *testing.T) {
	e := newEnv(t, nil, withConfig(func(c *config.Config) { c.MaxTextBytes = 64 }))
	res := e.run(`
import exec_tools
b = exec_tools._BRIDGE
b.publish("text", 1, '{"n": 1, "text": "0123456789"}')
b.publish("text", 2, '{"n": 2, "text": "%s"}' % ("X" * 40))
b.publish("text", 3, '{"n": 3, "text": "abcdefghijklmn"}')
b.publish("text", 4, '{"n": 4, "text": "a"}')
`)
	assert.Equal(t, []string{"0123456789", "abcdefghijklmn"}, res.Blocks,
		"30 + 34 bytes fill the cap of 64 exactly; 60 and 21 more do not fit")
}

// A session cell's token arrives in its eval request on the kernel's
// request channel: it is in no file of the kernel's workspace or the
// cell's bridge, not in the environment, and the channel is a socket,
// which no process (this one included) can reopen through /proc.
func TestASessionCellFindsItsTokenInNoFileOrEnvironment(t *testing.T) {
	e := sessionEnv(t, map[string]string{"a.txt": "alpha\n"})
	o := e.attach("s1")
	res := e.cell(o, tokenSearch+`
import errno
found = token_found([os.path.dirname(os.path.abspath(exec_tools.__file__)), os.path.dirname(exec_tools._BRIDGE.dir)])
try:
    os.close(os.open("/proc/self/fd/0", os.O_WRONLY))
    reopened = "reopened"
except OSError as e:
    reopened = errno.errorcode[e.errno]
text(repr(found))
text(reopened)
text(read("a.txt"))
`)
	assert.Equal(t, []string{"[]", "ENXIO", "     1\talpha"}, res.Blocks)
}
