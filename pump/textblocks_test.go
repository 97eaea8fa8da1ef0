package pump

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

// textFrame is the frame the shim writes: json.dumps with its default
// separators and ensure_ascii.
func textFrame(n int, text string) []byte {
	return []byte(fmt.Sprintf(`{"n": %d, "text": %s}`, n, appendJSONString(nil, text)))
}

func TestReadTextBlocksWithNoBlocksIsEmpty(t *testing.T) {
	h := newHarness(t)
	assert.Empty(t, ReadTextBlocks(h.dir, 65536))
}

func TestReadTextBlocksReturnsBlocksInNumericOrder(t *testing.T) {
	h := newHarness(t)
	h.publish("text-10.json", textFrame(10, "ten"))
	h.publish("text-2.json", textFrame(2, "two"))
	h.publish("text-1.json", textFrame(1, "one\nline"))
	assert.Equal(t, []string{"one\nline", "two", "ten"}, ReadTextBlocks(h.dir, 65536))
	assert.Len(t, h.names(), 3, "blocks are left for teardown")
}

func TestReadTextBlocksChargesFileBodiesAgainstTheBudget(t *testing.T) {
	h := newHarness(t)
	first := textFrame(1, "0123456789")
	require.Len(t, first, 30)
	h.publish("text-1.json", first)
	h.publish("text-2.json", textFrame(2, strings.Repeat("X", 40)))
	h.publish("text-3.json", textFrame(3, "small"))
	assert.Equal(t, []string{"0123456789", "small"}, ReadTextBlocks(h.dir, 64),
		"a skipped block does not stop the scan")
}

func TestReadTextBlocksChargesEscapes(t *testing.T) {
	h := newHarness(t)
	nuls := strings.Repeat("\x00", 8000)
	frame := textFrame(1, nuls)
	require.Len(t, frame, 48020)
	h.publish("text-1.json", frame)
	h.publish("text-2.json", textFrame(2, strings.Repeat("\x00", 4000)))
	assert.Equal(t, []string{nuls}, ReadTextBlocks(h.dir, 65536))
}

func TestReadTextBlocksSkipsLinksHugeAndMalformedBlocks(t *testing.T) {
	h := newHarness(t)
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, textFrame(1, "linked"), 0o600))
	require.NoError(t, os.Symlink(target, h.path("text-1.json")))
	h.publish("text-2.json", textFrame(2, strings.Repeat("h", 5<<20)))
	h.publish("text-3.json", []byte(`{"n": 3, "text": 3}`))
	h.publish("text-4.json", []byte(`[1]`))
	h.publish("text-5.json", []byte("{\"n\": 5, \"text\": \"\xff\"}"))
	h.publish("text-x.json", textFrame(0, "bad name"))
	require.NoError(t, os.Mkdir(h.path("text-6.json"), 0o700))
	h.publish("text-7.json", textFrame(7, "kept"))

	assert.Equal(t, []string{"kept"}, ReadTextBlocks(h.dir, 65536))
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, textFrame(1, "linked"), data)
	assert.True(t, h.exists("text-x.json"), "bad names are ignored, not deleted")
}

func TestReadTextBlocksDecodesEveryStringTheShimCanWrite(t *testing.T) {
	h := newHarness(t)
	corpus := []string{"\ufffd lone surrogate replaced", "tab\tnewline\n\x01\x1f", "emoji 😀🎉", "sep \u2028\u2029", `quote " backslash \`, "é中文"}
	for i, s := range corpus {
		h.publish(fmt.Sprintf("text-%d.json", i+1), textFrame(i+1, s))
	}
	assert.Equal(t, corpus, ReadTextBlocks(h.dir, 65536))
}

func TestIntermediateRPCDataNeverBecomesAResultBlock(t *testing.T) {
	mb := strings.Repeat("m", 1<<20)
	read := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) {
		return tools.TextResult(mb), nil
	}}
	h := newHarness(t, read)
	h.request(1, "read", nil)
	h.sweep()
	h.publish("text-1.json", textFrame(1, "summary"))
	assert.Equal(t, []string{"summary"}, ReadTextBlocks(h.dir, 65536))
	assert.EqualValues(t, 1<<20, h.stats.Bytes)
}

func TestReadExceptionReadsTheShimsRecord(t *testing.T) {
	cases := []struct {
		name string
		body string
		want Exception
		ok   bool
	}{
		{"with errno", `{"type": "FileNotFoundError", "errno": 2}`, Exception{Type: "FileNotFoundError", Errno: 2, HasErrno: true}, true},
		{"null errno", `{"type": "ValueError", "errno": null}`, Exception{Type: "ValueError"}, true},
		{"no errno", `{"type": "KeyError"}`, Exception{Type: "KeyError"}, true},
		{"float errno", `{"type": "OSError", "errno": 2.5}`, Exception{}, false},
		{"string errno", `{"type": "OSError", "errno": "2"}`, Exception{}, false},
		{"type not string", `{"type": 1, "errno": null}`, Exception{}, false},
		{"array", `["ValueError"]`, Exception{}, false},
		{"not json", `{`, Exception{}, false},
		{"too big", `{"type": "` + strings.Repeat("E", 4096) + `"}`, Exception{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.publish(ExceptionFile, []byte(c.body))
			got, ok := ReadException(h.dir)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestReadExceptionRefusesLinksAndAbsence(t *testing.T) {
	h := newHarness(t)
	_, ok := ReadException(h.dir)
	assert.False(t, ok)
	target := filepath.Join(t.TempDir(), "exc")
	require.NoError(t, os.WriteFile(target, []byte(`{"type": "ValueError", "errno": null}`), 0o600))
	require.NoError(t, os.Symlink(target, h.path(ExceptionFile)))
	_, ok = ReadException(h.dir)
	assert.False(t, ok)
}
