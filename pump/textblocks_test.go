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

// textBlocks reads the blocks with the harness's token, failing the test
// if any frame is refused: these are all frames of the bridge's own shim.
func (h *harness) textBlocks(maxTextBytes int) []string {
	h.t.Helper()
	refused := 0
	blocks := ReadTextBlocks(h.dir, h.token, maxTextBytes, func() { refused++ })
	assert.Zero(h.t, refused, "refused frames")
	return blocks
}

func TestReadTextBlocksWithNoBlocksIsEmpty(t *testing.T) {
	h := newHarness(t)
	assert.Empty(t, h.textBlocks(65536))
}

func TestReadTextBlocksReturnsBlocksInNumericOrder(t *testing.T) {
	h := newHarness(t)
	h.frame(KindText, 10, textFrame(10, "ten"))
	h.frame(KindText, 2, textFrame(2, "two"))
	h.frame(KindText, 1, textFrame(1, "one\nline"))
	assert.Equal(t, []string{"one\nline", "two", "ten"}, h.textBlocks(65536))
	assert.Len(t, h.names(), 3, "blocks are left for teardown")
}

func TestReadTextBlocksChargesFileBodiesAgainstTheBudget(t *testing.T) {
	h := newHarness(t)
	first := textFrame(1, "0123456789")
	require.Len(t, first, 30)
	h.frame(KindText, 1, first)
	h.frame(KindText, 2, textFrame(2, strings.Repeat("X", 40)))
	h.frame(KindText, 3, textFrame(3, "small"))
	assert.Equal(t, []string{"0123456789", "small"}, h.textBlocks(64),
		"a skipped block does not stop the scan")
}

func TestReadTextBlocksChargesEscapes(t *testing.T) {
	h := newHarness(t)
	nuls := strings.Repeat("\x00", 8000)
	frame := textFrame(1, nuls)
	require.Len(t, frame, 48020)
	h.frame(KindText, 1, frame)
	h.frame(KindText, 2, textFrame(2, strings.Repeat("\x00", 4000)))
	assert.Equal(t, []string{nuls}, h.textBlocks(65536))
}

func TestReadTextBlocksSkipsLinksHugeAndMalformedBlocks(t *testing.T) {
	h := newHarness(t)
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, textFrame(1, "linked"), 0o600))
	require.NoError(t, os.Symlink(target, h.path(h.frameName(KindText, "1", textFrame(1, "linked")))))
	h.frame(KindText, 2, textFrame(2, strings.Repeat("h", 5<<20)))
	h.frame(KindText, 3, []byte(`{"n": 3, "text": 3}`))
	h.frame(KindText, 4, []byte(`[1]`))
	h.frame(KindText, 5, []byte("{\"n\": 5, \"text\": \"\xff\"}"))
	h.publish("text-x.json", textFrame(0, "bad name"))
	require.NoError(t, os.Mkdir(h.path(h.frameName(KindText, "6", nil)), 0o700))
	h.frame(KindText, 7, textFrame(7, "kept"))

	refused := 0
	assert.Equal(t, []string{"kept"}, ReadTextBlocks(h.dir, h.token, 65536, func() { refused++ }))
	assert.Equal(t, 4, refused, "the link, the oversized frame, the bad name and the directory; a malformed body under a good MAC is just skipped")
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, textFrame(1, "linked"), data)
	assert.True(t, h.exists("text-x.json"), "bad names are ignored, not deleted")
}

func TestReadTextBlocksDecodesEveryStringTheShimCanWrite(t *testing.T) {
	h := newHarness(t)
	corpus := []string{"\ufffd lone surrogate replaced", "tab\tnewline\n\x01\x1f", "emoji 😀🎉", "sep \u2028\u2029", `quote " backslash \`, "é中文"}
	for i, s := range corpus {
		h.frame(KindText, i+1, textFrame(i+1, s))
	}
	assert.Equal(t, corpus, h.textBlocks(65536))
}

func TestIntermediateRPCDataNeverBecomesAResultBlock(t *testing.T) {
	mb := strings.Repeat("m", 1<<20)
	read := &funcTool{name: "read", fn: func(context.Context, map[string]any) (tools.Result, error) {
		return tools.TextResult(mb), nil
	}}
	h := newHarness(t, read)
	h.request(1, "read", nil)
	h.sweep()
	h.frame(KindText, 1, textFrame(1, "summary"))
	assert.Equal(t, []string{"summary"}, h.textBlocks(65536))
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
			h.exceptionRecord([]byte(c.body))
			got, ok := ReadException(h.dir, h.token, nil)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestReadExceptionRefusesLinksAndAbsence(t *testing.T) {
	h := newHarness(t)
	_, ok := ReadException(h.dir, h.token, nil)
	assert.False(t, ok)
	target := filepath.Join(t.TempDir(), "exc")
	body := []byte(`{"type": "ValueError", "errno": null}`)
	require.NoError(t, os.WriteFile(target, body, 0o600))
	require.NoError(t, os.Symlink(target, h.path(h.frameName(KindException, "", body))))
	_, ok = ReadException(h.dir, h.token, nil)
	assert.False(t, ok)
}

// A block another session planted, or a genuine block copied under
// another number or kind, is refused before the budget is charged, so it
// can neither show in this run's result nor crowd out a genuine block.
func TestUnauthenticatedTextBlocksAreRefusedCountedAndNeverCharged(t *testing.T) {
	h := newHarness(t)
	other, err := NewToken()
	require.NoError(t, err)
	genuine := textFrame(2, "real")
	h.frame(KindText, 2, genuine)
	big := textFrame(1, strings.Repeat("F", 40))
	h.publish("text-1.json", big)
	h.publish(FrameName(KindText, "1", FrameMAC(other, KindText, "1", big)), big)
	h.publish(FrameName(KindText, "3", FrameMAC(h.token, KindText, "2", genuine)), genuine)
	h.publish(FrameName(KindText, "0", FrameMAC(h.token, KindNotify, "0", genuine)), genuine)
	h.publish(FrameName(KindText, "4", strings.Repeat("f", macLen)), textFrame(4, "guessed"))
	refused := 0
	budget := len(genuine) // exactly the genuine block: a charged forgery would push it out
	assert.Equal(t, []string{"real"}, ReadTextBlocks(h.dir, h.token, budget, func() { refused++ }))
	assert.Equal(t, 5, refused)
}

func TestReadTextBlocksWithoutATokenRefusesEverything(t *testing.T) {
	h := newHarness(t)
	h.frame(KindText, 1, textFrame(1, "x"))
	refused := 0
	assert.Empty(t, ReadTextBlocks(h.dir, "", 65536, func() { refused++ }))
	assert.Equal(t, 1, refused)
}

// exception-<mac>.json decides a per-call run's limit headline: a record
// planted by another session (no MAC, another token, a genuine record's
// body under a number) is refused and counted, and the genuine one read.
func TestReadExceptionBelievesOnlyTheAuthenticatedRecord(t *testing.T) {
	h := newHarness(t)
	other, err := NewToken()
	require.NoError(t, err)
	planted := []byte(`{"type": "MemoryError", "errno": null}`)
	h.publish("exception.json", planted)
	h.publish(FrameName(KindException, "", FrameMAC(other, KindException, "", planted)), planted)
	refused := 0
	_, ok := ReadException(h.dir, h.token, func() { refused++ })
	assert.False(t, ok, "no record of this run")
	assert.Equal(t, 2, refused)

	genuine := []byte(`{"type": "ValueError", "errno": null}`)
	h.exceptionRecord(genuine)
	h.publish(FrameName(KindException, "1", FrameMAC(h.token, KindException, "", genuine)), genuine)
	refused = 0
	got, ok := ReadException(h.dir, h.token, func() { refused++ })
	assert.True(t, ok)
	assert.Equal(t, Exception{Type: "ValueError"}, got)
	assert.Equal(t, 3, refused)
}
