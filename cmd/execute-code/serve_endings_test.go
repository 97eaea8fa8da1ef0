package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// ending is what a session cell's result must say about how it ended:
// the whole text and the details that tell the ending apart (nil: the key
// is absent or null).
type ending struct {
	text     string
	reason   any
	killedBy any
	exitCode any
	retained bool
}

func assertEnding(t *testing.T, a map[string]any, want ending) {
	t.Helper()
	res, ok := a["result"].(map[string]any)
	require.True(t, ok, "not a result: %v", a)
	content := res["content"].([]any)
	require.Len(t, content, 1)
	id := fmt.Sprint(a["id"])
	assert.Equal(t, want.text, content[0].(map[string]any)["text"], "text of %s", id)
	d := res["details"].(map[string]any)
	assert.Equal(t, want.reason, d["reason"], "reason of %s", id)
	assert.Equal(t, want.killedBy, d["killed_by"], "killed_by of %s", id)
	assert.Equal(t, want.exitCode, d["exit_code"], "exit_code of %s", id)
	assert.Equal(t, want.retained, d["state_retained"], "state_retained of %s", id)
}

const discarded = " " + executecode.StateDiscardedLine

// Each ending a session cell can meet through serve is one plain
// sentence with the type named once and the exit code given: an exit,
// a signal or a timeout reads as a per-call run's (an exit's line after
// the output), an exception keeps its `Script raised` headline; and the
// sentence says when the session's state is gone.
func TestServeSessionEndingsReadAsPerCallRuns(t *testing.T) {
	p := startServe(t)
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.answers(1)
	cases := []struct {
		script string
		want   ending
	}{
		{"x = 1\nprint(2)", ending{text: "2\n", exitCode: 0.0, retained: true}},
		{"print('hi')\nimport sys\nsys.exit(3)", ending{text: "hi\n\n\nScript exited with code 3",
			reason: "system_exit", exitCode: 3.0, retained: true}},
		{"sys.exit('bye')", ending{text: "bye\n\n\nScript exited with code 1",
			reason: "system_exit", exitCode: 1.0, retained: true}},
		{"sys.exit(0)", ending{text: "(script produced no output)", reason: "system_exit", exitCode: 0.0, retained: true}},
		{"print(x)\nraise ValueError('bad')", ending{text: "Script raised ValueError: bad (exit code 1)\n\n1\nTraceback (most recent call last):\n" +
			"  File \"<cell>\", line 3, in <module>\n    raise ValueError('bad')\nValueError: bad\n",
			reason: "exception", exitCode: 1.0, retained: true}},
		{"raise KeyboardInterrupt", ending{text: "Script raised KeyboardInterrupt (exit code 130)\n\nTraceback (most recent call last):\n" +
			"  File \"<cell>\", line 2, in <module>\n    raise KeyboardInterrupt\nKeyboardInterrupt\n",
			reason: "exception", exitCode: 130.0, retained: true}},
		{"import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", ending{text: "Script killed by signal SIGKILL." + discarded,
			reason: "port_exit", killedBy: "signal", exitCode: 137.0}},
		{"x = 1\ntext(str(x))\nimport os\nos._exit(4)", ending{text: "Script exited with code 4." + discarded +
			"\n\nScript result (text()):\n1\n\nDiagnostics (stdout/stderr, not the result):\n(script produced no output)",
			reason: "port_exit", exitCode: 4.0}},
	}
	for i, tc := range cases {
		line, err := jsonLine(map[string]any{"id": i + 2, "op": "execute", "session": "s", "script": tc.script})
		require.NoError(t, err)
		p.send(line)
		assertEnding(t, p.answer(), tc.want)
	}

	// A running cell that times out, and the cell queued behind it, which
	// its kernel's end takes with it; then a queued cell whose own
	// deadline passes while the one before it runs.
	p.send(`{"id":20,"op":"execute","session":"s","timeout_ms":1000,"script":"import time\nprint('p', flush=True)\ntime.sleep(30)"}`)
	p.send(`{"id":21,"op":"execute","session":"s","script":"text('never')"}`)
	got, _ := p.answers(2)
	assertEnding(t, got[20], ending{text: "Script timed out after 1000ms." + discarded + "\n\np\n",
		reason: "timeout", killedBy: "timeout"})
	assertEnding(t, got[21], ending{text: "Script did not run: the cell before it was stopped and the session's kernel discarded." + discarded,
		reason: "kernel_discarded"})

	// A kernel that dies under a cell takes the cell queued behind it.
	p.send(`{"id":30,"op":"execute","session":"s","script":"import os, time\ntime.sleep(0.5)\nos._exit(5)"}`)
	p.send(`{"id":31,"op":"execute","session":"s","script":"text('never')"}`)
	got, _ = p.answers(2)
	assertEnding(t, got[30], ending{text: "Script exited with code 5." + discarded, reason: "port_exit", exitCode: 5.0})
	assertEnding(t, got[31], ending{text: "Script did not run: the session's kernel exited under the cell before it." + discarded,
		reason: "port_exit"})

	p.send(`{"id":22,"op":"execute","session":"s","script":"import time\ntime.sleep(3)"}`)
	p.send(`{"id":23,"op":"execute","session":"s","timeout_ms":1000,"script":"text('late')"}`)
	got, _ = p.answers(2)
	assertEnding(t, got[23], ending{text: "Script timed out after 1000ms before it started. Nothing ran; the session's state is kept.",
		reason: "timeout", killedBy: "timeout", retained: true})
	assertEnding(t, got[22], ending{text: "(script produced no output)", exitCode: 0.0, retained: true})
}

// A full queue refuses the cell at once, in a sentence, and nothing is lost.
func TestServeQueueFullIsASentence(t *testing.T) {
	p := startServeIn(t, t.TempDir(), []string{"LEMON_EXECUTE_CODE_MAX_QUEUED_CELLS_PER_KERNEL=1"})
	p.send(`{"id":1,"op":"attach","session":"s","agent":"a"}`)
	p.send(`{"id":2,"op":"execute","session":"s","script":"x = 1"}`)
	p.answers(2)
	p.send(`{"id":3,"op":"execute","session":"s","script":"import time\ntime.sleep(2)"}`)
	p.send(`{"id":4,"op":"execute","session":"s","script":"x += 1"}`)
	p.send(`{"id":5,"op":"execute","session":"s","script":"x += 10"}`)
	refused := p.answer()
	require.Equal(t, 5.0, refused["id"])
	assertEnding(t, refused, ending{text: "Script did not run: the session's kernel is busy and its queue is full (max_queued_cells_per_kernel = 1). " +
		"Nothing ran; the session's state is kept.", reason: "queue_full", retained: true})
	p.answers(2)
	p.send(`{"id":6,"op":"execute","session":"s","script":"print(x)"}`)
	assertEnding(t, p.answer(), ending{text: "2\n", exitCode: 0.0, retained: true})
}

func jsonLine(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
