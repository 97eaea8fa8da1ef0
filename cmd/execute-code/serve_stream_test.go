package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func resultText(t *testing.T, a map[string]any) string {
	t.Helper()
	res, ok := a["result"].(map[string]any)
	require.True(t, ok, "not a result: %v", a)
	content, _ := res["content"].([]any)
	require.Len(t, content, 1)
	return content[0].(map[string]any)["text"].(string)
}

// Ten fresh sessions print 200 lines alternating between stdout and
// stderr (most left to line buffering), then a child writes to both: each
// comes back exactly in written order, as a per-call run's does.
func TestServeSessionsKeepStdoutAndStderrInWrittenOrder(t *testing.T) {
	script := "import subprocess, sys\n" +
		"for i in range(200):\n" +
		"    stream = sys.stdout if i % 2 == 0 else sys.stderr\n" +
		"    print(('out %d' if i % 2 == 0 else 'err %d') % i, file=stream, flush=(i % 3 == 0))\n" +
		"subprocess.run(['sh', '-c', 'echo a; echo b >&2; echo c'])\n"
	var want strings.Builder
	for i := 0; i < 200; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&want, "out %d\n", i)
		} else {
			fmt.Fprintf(&want, "err %d\n", i)
		}
	}
	want.WriteString("a\nb\nc\n")
	quoted, err := json.Marshal(script)
	require.NoError(t, err)

	p := startServe(t)
	const sessions = 10
	for i := 0; i < sessions; i++ {
		p.send(fmt.Sprintf(`{"id":%d,"op":"attach","session":"s%d","agent":"a"}`, 2*i+1, i))
		p.send(fmt.Sprintf(`{"id":%d,"op":"execute","session":"s%d","script":%s}`, 2*i+2, i, quoted))
	}
	got, _ := p.answers(2 * sessions)
	outOfOrder := 0
	for i := 0; i < sessions; i++ {
		a := got[float64(2*i+2)]
		require.Equal(t, true, details(t, a)["persistent"], "s%d ran on a kernel", i)
		if text := resultText(t, a); !strings.Contains(text, want.String()) {
			outOfOrder++
			t.Logf("session s%d out of order:\n%s", i, text)
		}
	}
	assert.Zero(t, outOfOrder, "sessions out of written order, of %d", sessions)
	for i := 0; i < sessions; i++ {
		p.send(fmt.Sprintf(`{"id":%d,"op":"detach","session":"s%d"}`, 100+i, i))
	}
	p.answers(sessions)
}
