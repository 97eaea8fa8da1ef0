package shimpy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// runRunnerChecks imports the runner as a module (its start-up runs only
// as __main__) and runs python assertions against its internals; the
// script prints "ok" when every one held.
func runRunnerChecks(t *testing.T, script string) {
	t.Helper()
	python := proctest.Python(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, RunnerName), []byte(Runner()), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "check.py"), []byte("import runner\n"+script+"\nprint('ok')\n"), 0o600))
	assert.Equal(t, "ok\n", runPlain(t, python, dir, "check.py"))
}

func TestRunnerDecodesRequestsExactlyAsJSONLoads(t *testing.T) {
	runRunnerChecks(t, `
import json, math
valid = [
    '{"v":1,"type":"init","cwd":"/"}', ' {"a" : [1, 2.5, -3e2, true, false, null]} ', '{"a":1,"a":2}',
    '{"s":"\\u00e9\\ud83d\\ude00\\ud800"}', '{"big":123456789012345678901234567890}', '[NaN, Infinity, -Infinity]',
    '"just a string"', '7', '{}', '\t{"x":"\\n"}\r',
]
for text in valid:
    got, want = runner._json_loads(text), json.loads(text)
    assert repr(got) == repr(want), (text, got, want)
invalid = ['{nope', '[1,2', '{"a":1} x', '', '"\x01"', '\ufeff{}', '{"a":1}{"b":2}', "{'a':1}", '[' * 100000 + ']' * 100000, 'nan']
for text in invalid:
    for decode in (runner._json_loads, json.loads):
        try:
            decode(text)
        except (ValueError, RecursionError):
            pass
        else:
            raise AssertionError((decode, text))
`)
}

func TestRunnerEncodesFramesExactlyAsJSONDumps(t *testing.T) {
	runRunnerChecks(t, `
import json
for frame in [
    {"v": 1, "type": "ready", "pid": 12},
    {"v": 1, "type": "exception", "id": "c\u00e9\U0001F600\ud800", "kind": "error", "name": "E", "message": None, "traceback": 'a"b\\c\n\t\x00\x7f'},
    {"v": 1, "type": "done", "id": "x", "dropped": 0},
]:
    assert runner._encode_frame(frame) == json.dumps(frame, separators=(",", ":")), frame
`)
}

func TestRunnerBoundKeepsTheLongestPrefixThatFits(t *testing.T) {
	runRunnerChecks(t, `
def cost(s):
    n = 2
    for ch in s:
        c = ord(ch)
        if ch in '"\\\b\f\n\r\t':
            n += 2
        elif c < 0x20:
            n += 6
        elif c < 0x7f:
            n += 1
        elif c <= 0xFFFF:
            n += 6
        else:
            n += 12
    return n
marker = "... [truncated]"
for s in ["", "short", "a" * 100, "\x00" * 50, "\u00e9" * 40, "\U0001F600" * 30, 'mixed "\\ \n\x01\u00e9\U0001F600' * 10, "x\ud800y" * 20]:
    for budget in (20, 31, 64, 100, 1000):
        out, cut = runner._bound(s, budget)
        clean = s.translate(runner._SURROGATES)
        assert "\ud800" not in out
        if cost(clean) <= budget:
            assert (out, cut) == (clean, False), (s, budget)
            continue
        assert cut and out.endswith(marker), (s, budget, out)
        prefix = out[:-len(marker)]
        assert clean.startswith(prefix)
        assert cost(out) <= budget, (s, budget, out)
        assert cost(clean[:len(prefix) + 1] + marker) > budget, (s, budget, out)
`)
}
