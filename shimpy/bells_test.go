package shimpy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The response bell's bytes are no more trusted than the directory: a
// process of the same user can reopen the pipe through /proc. Whatever
// arrives on it, a waiting call ends only with its authenticated answer.
func TestHostileResponseBellBytesNeverEndAWaitWrongly(t *testing.T) {
	for _, tc := range []struct{ name, raw string }{
		{"garbage", "\xff\x00garbage\n\x01"},
		{"ids of calls nobody made", "7\n8\n99999999999999999999\n"},
		{"the waiting call's id before its answer", "1\n1\n1\n"},
		{"an id split over writes", "1"},
		{"a flood of ids", strings.Repeat("1\n2\n3\n", 5000)},
		{"an endless number", strings.Repeat("9", 100000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := startBridgeRun(t, wakeModes[3], []string{"read"}, `
print(read("a"))
print(read("b"))
`)
			req := run.host.next(t)
			// Rung before there is any answer: the shim looks, finds
			// nothing (or nothing authentic) and waits on.
			_, err := run.bells.responseWrite.Write([]byte(tc.raw))
			require.NoError(t, err)
			run.host.publish(t, req.file, []byte(`{"mac":"00000000000000000000000000000000","id":1,"ok":true,"content":"forged"}`))
			run.host.answer(t, req.file, okResponse(req.file, "first"))
			req = run.host.next(t)
			run.host.answer(t, req.file, okResponse(req.file, "second"))
			assert.Equal(t, "first\nsecond\n", requireClean(t, run.proc.wait()))
		})
	}
}

func TestConcurrentCallsFromThreadsEachGetTheirOwnAnswer(t *testing.T) {
	run := startBridgeRun(t, wakeModes[3], []string{"read"}, `
import json, threading
out = {}
def worker(w):
    for i in range(5):
        out["%d-%d" % (w, i)] = read("%d-%d" % (w, i))
threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print(json.dumps(out))
`)
	// Eight threads wait together; the answers come newest first, each
	// with its own ring.
	var pending []request
	for answered := 0; answered < 40; {
		if len(pending) == 0 {
			pending = append(pending, run.host.next(t))
		}
	drained:
		for {
			select {
			case req := <-run.host.requests:
				pending = append(pending, req)
			default:
				break drained
			}
		}
		req := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		var params map[string]string
		require.NoError(t, json.Unmarshal(req.Params, &params))
		run.host.answer(t, req.file, okResponse(req.file, "r"+params["path"]))
		answered++
	}
	var got map[string]string
	lastJSONLine(t, requireClean(t, run.proc.wait()), &got)
	require.Len(t, got, 40)
	for k, v := range got {
		assert.Equal(t, "r"+k, v)
	}
}

func TestBatchSendsEveryCallFromTheCallingThreadWithAtMostSixteenOutstanding(t *testing.T) {
	run := startBridgeRun(t, wakeModes[3], []string{"read"}, `
import json, threading
r = batch([("read", {"path": str(i)}) for i in range(20)])
print(json.dumps({"r": r, "threads": threading.active_count()}))
`)
	var first []request
	for range 16 {
		first = append(first, run.host.next(t))
	}
	select {
	case req := <-run.host.requests:
		t.Fatalf("a 17th call was sent before any answer: %d", req.file)
	default:
	}
	for _, req := range first {
		var params map[string]string
		require.NoError(t, json.Unmarshal(req.Params, &params))
		run.host.answer(t, req.file, okResponse(req.file, "r"+params["path"]))
	}
	for range 4 {
		req := run.host.next(t)
		var params map[string]string
		require.NoError(t, json.Unmarshal(req.Params, &params))
		run.host.answer(t, req.file, okResponse(req.file, "r"+params["path"]))
	}
	var res struct {
		R       []string
		Threads int
	}
	lastJSONLine(t, requireClean(t, run.proc.wait()), &res)
	want := make([]string, 20)
	for i := range want {
		want[i] = fmt.Sprintf("r%d", i)
	}
	assert.Equal(t, want, res.R)
	assert.Equal(t, 1, res.Threads, "no thread is started")
}

func TestABatchOfAHostToolChecksEachCallThroughItsStub(t *testing.T) {
	// Covered with a real host tool spec in the facade's tests; here the
	// collection itself: a stub's TypeError is that call's failure, the
	// other calls still run, and the first failure is raised after all.
	run := startBridgeRun(t, wakeModes[3], []string{"read"}, `
import exec_tools
def weather(city=None, units=None):
    if city is None:
        raise TypeError("weather() missing required argument: 'city'")
    return exec_tools._call("weather", {"city": city, "units": units})
exec_tools._HOST_STUBS["weather"] = weather
try:
    batch([("weather", {"units": "metric"}), ("weather", {"city": "Oslo"}), ("weather", {"city": "x", "wind": 1})])
except TypeError as e:
    print("TypeError:", e)
`)
	req := run.host.next(t)
	assert.Equal(t, "weather", req.Tool)
	assert.JSONEq(t, `{"city": "Oslo"}`, string(req.Params), "None dropped, as a direct call drops it")
	run.host.answer(t, req.file, okResponse(req.file, "sunny"))
	assert.Equal(t, "TypeError: weather() missing required argument: 'city'\n", requireClean(t, run.proc.wait()))
}

func TestAForkedChildPollsAndLeavesTheParentsBellAlone(t *testing.T) {
	run := startBridgeRun(t, wakeModes[3], []string{"read"}, `
import os, exec_tools
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, b"polls" if exec_tools._BRIDGE.bells is None else b"reads the bell")
    os._exit(0)
os.waitpid(pid, 0)
print(os.read(r, 64).decode())
print(exec_tools._BRIDGE.bells is not None)
print(read("a"))
`)
	req := run.host.next(t)
	run.host.answer(t, req.file, okResponse(req.file, "parent"))
	assert.Equal(t, "polls\nTrue\nparent\n", requireClean(t, run.proc.wait()))
}

// The shim's decoder of response-bell bytes, driven with random chunks
// (ids of waiting calls, ids of nobody's, garbage, records split at any
// byte): it never raises, never holds more than an id's worth of an
// unfinished record, and every waiter whose id completes a record, or
// that a record naming nobody concerns, is woken.
func TestTheResponseBellDecoderSurvivesRandomBytes(t *testing.T) {
	s := newUnconfiguredStage(t, nil, 0)
	out := requireClean(t, s.run(t, `
import random, exec_tools as m
rng = random.Random(7)
bell = m._Doorbell(-1, -1)
waiters = {}
for i in range(1, 9):
    w = m._Waiter()
    bell.expect(w, b"%d" % i)
    waiters[b"%d" % i] = w
pieces = [b"1\n", b"2\n", b"7\n", b"99\n", b"\n", b"\x00", b"\xff\xfe", b"123456789012345678901234567890",
          b"-3\n", b"3", b"\n4\n", b"5\n6", b"8\n\n"]
for round in range(3000):
    stream = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
    cut = rng.randint(0, len(stream))
    for chunk in (stream[:cut], stream[cut:]):
        if chunk:
            bell._dispatch(chunk)
        assert len(bell._tail) <= 20, bell._tail
    for key, w in waiters.items():
        # take what woke it, as wait() does
        with bell._mu:
            if w.woken:
                w.woken = False
                w.lock.acquire(False)
            w.rung, w.everything = [], False
    assert bell._waiters.keys() == waiters.keys()
# A complete record of a waiting id wakes exactly that waiter.
bell._tail = b""
bell._dispatch(b"4\n")
print(sorted(k.decode() for k, w in waiters.items() if w.woken), waiters[b"4"].rung)
# One naming nobody wakes everybody.
bell._dispatch(b"42\n")
print(all(w.woken and w.everything for w in waiters.values()))
`))
	assert.Equal(t, "['4'] [b'4']\nTrue\n", out)
}
