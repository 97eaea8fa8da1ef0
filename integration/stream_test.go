package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/config"
)

// alternatingScript prints n lines alternating between stdout and stderr,
// every third one flushed explicitly, the rest left to line buffering.
const alternatingScript = `import sys
for i in range(200):
    stream = sys.stdout if i % 2 == 0 else sys.stderr
    print(("out %d" if i % 2 == 0 else "err %d") % i, file=stream, flush=(i % 3 == 0))
`

func alternatingWant() string {
	var b strings.Builder
	for i := 0; i < 200; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "out %d\n", i)
		} else {
			fmt.Fprintf(&b, "err %d\n", i)
		}
	}
	return b.String()
}

// The kernel's stdout and stderr share one pipe, as a per-call run's do,
// so interleaved prints come back exactly as written, in every fresh
// session.
func TestSessionInterleavedStdoutStderrKeepWrittenOrder(t *testing.T) {
	e := sessionEnv(t, nil)
	want := alternatingWant()
	outOfOrder := 0
	for i := 0; i < 10; i++ {
		o := e.attach(fmt.Sprintf("order-%d", i))
		res := e.cell(o, alternatingScript)
		if !strings.Contains(res.Text(), want) {
			outOfOrder++
			t.Logf("session %d out of order:\n%s", i, res.Text())
		}
		require.NoError(t, o.Detach(t.Context()))
	}
	assert.Zero(t, outOfOrder, "sessions whose output came back out of written order (of 10)")
}

// A child writing to the inherited descriptors lands in the one stream
// in the order it wrote.
func TestSessionChildProcessOutputKeepsWrittenOrder(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("child-order")
	script := `import subprocess
for _ in range(20):
    subprocess.run(["sh", "-c", "echo a; echo b >&2; echo c"])
`
	want := strings.Repeat("a\nb\nc\n", 20)
	for i := 0; i < 3; i++ {
		res := e.cell(o, script)
		assert.Contains(t, res.Text(), want, "cell %d", i)
	}
}

// A long line of two-byte characters behind a one-byte prefix, while a
// thread and a child write to stderr: no write ever splits a character,
// so the output never holds U+FFFD, in either mode.
const splitCharScript = `import subprocess, sys, threading
stop = threading.Event()
def noise():
    while not stop.is_set():
        sys.stderr.write("e\n")
t = threading.Thread(target=noise)
t.start()
child = subprocess.Popen(["sh", "-c", "while :; do echo c >&2; done"])
for _ in range(20):
    sys.stdout.write("x" + "\u00e9" * 50000 + "\n")
child.kill()
child.wait()
stop.set()
t.join()
`

// bigOutput keeps all of the long-line script's output in the text.
var bigOutput = withConfig(func(c *config.Config) { c.MaxOutputBytes = 8 << 20 })

func TestLongMultibyteLinesNeverSplitACharacter(t *testing.T) {
	check := func(t *testing.T, text string) {
		t.Helper()
		assert.NotContains(t, text, "\ufffd")
		assert.Contains(t, text, "x\u00e9\u00e9")
	}
	t.Run("per-call", func(t *testing.T) {
		e := newEnv(t, nil, bigOutput)
		for i := 0; i < 5; i++ {
			check(t, e.run(splitCharScript).Text())
		}
	})
	t.Run("session", func(t *testing.T) {
		e := sessionEnv(t, nil, bigOutput)
		o := e.attach("split-char")
		for i := 0; i < 5; i++ {
			check(t, e.cell(o, splitCharScript).Text())
		}
	})
}
