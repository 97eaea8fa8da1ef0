package pump

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepDeletesNonIntegerRequestNamesWithoutAnswering(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.publish("req-abc.json", []byte(`{}`))
	h.publish("req-.json", []byte(`{}`))
	h.publish("req-1_000.json", []byte(`{}`))
	h.sweep()
	assert.Empty(t, h.names())
	assert.Zero(t, read.runs.Load())
	assert.Equal(t, newStats(), h.stats)
}

func TestSweepLeavesADirectoryAtARequestNameAndDoesNotCountIt(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.MaxRequestsPerSweep = 1
	require.NoError(t, os.MkdirAll(h.path("req-1.json/inner"), 0o700))
	require.NoError(t, os.WriteFile(h.path("req-1.json/inner/file"), []byte("keep"), 0o600))
	h.request(2, "read", nil)
	h.sweep()

	assert.True(t, h.mustResponse(2).OK, "the directory did not take the only slot of the sweep")
	_, answered := h.response(1)
	assert.False(t, answered)
	data, err := os.ReadFile(h.path("req-1.json/inner/file"))
	require.NoError(t, err)
	assert.Equal(t, "keep", string(data))
	assert.Equal(t, 1, h.stats.Calls)
}

func TestSweepAcceptsSignedAndPaddedIDs(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.request(-3, "read", map[string]any{"text": "neg"})
	seven := mustJSON(t, map[string]any{"tool": "read", "params": map[string]any{"text": "seven"}})
	h.publish(h.frameName(KindRequest, "007", seven), seven)
	five := mustJSON(t, map[string]any{"tool": "read", "params": map[string]any{"text": "five"}})
	h.publish(h.frameName(KindRequest, "+5", five), five)
	h.sweep()
	assert.Equal(t, response{ID: -3, OK: true, Content: "neg"}, h.mustResponse(-3))
	assert.Equal(t, response{ID: 7, OK: true, Content: "seven"}, h.mustResponse(7))
	assert.Equal(t, response{ID: 5, OK: true, Content: "five"}, h.mustResponse(5))
	assert.FileExists(t, h.path("res--3.json"))
}

func TestResponsesAreOwnerOnlyRegularFilesThatReplaceAPlantedSymlink(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, []byte("untouched"), 0o644))
	require.NoError(t, os.Symlink(target, h.path(responseName(1))))
	h.request(1, "read", map[string]any{"text": "fresh"})
	h.request(2, "nosuch", nil)
	h.sweep()

	for _, id := range []int64{1, 2} {
		fi, err := os.Lstat(h.path(responseName(id)))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "res-%d is a regular file", id)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	assert.Equal(t, "fresh", h.mustResponse(1).Content)
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "untouched", string(data))
}

func TestSweepDropsARequestAlreadyAnsweredWithoutCharging(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.hostResponse(4, true, "earlier")
	h.request(4, "read", nil)
	h.sweep()
	assert.False(t, h.exists(h.reqName(4)))
	assert.Equal(t, "earlier", h.mustResponse(4).Content)
	assert.Zero(t, read.runs.Load())
	assert.Zero(t, h.stats.Calls)
	assert.Zero(t, h.stats.Errors)
	assert.Contains(t, h.stats.Seen, int64(4))
}

func TestSweepDoesNotCountASymlinkedResponseAsAnswered(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	target := filepath.Join(t.TempDir(), "res")
	require.NoError(t, os.WriteFile(target, []byte(`{"id":1,"ok":true,"content":"forged"}`), 0o600))
	require.NoError(t, os.Symlink(target, h.path(responseName(1))))
	h.request(1, "read", map[string]any{"text": "real"})
	h.sweep()
	assert.Equal(t, "real", h.mustResponse(1).Content)
	assert.Equal(t, 1, h.stats.Calls)
}

// A same-user script of another session can plant a response before the
// pump answers; without the token it cannot authenticate one, so the call
// runs and its real answer replaces the planted file.
func TestSweepDoesNotTakeAnUnauthenticatedResponseForAnAnswer(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	other, err := NewToken()
	require.NoError(t, err)
	h.publish(responseName(1), []byte(`{"id":1,"ok":true,"content":"forged"}`))
	h.publish(responseName(2), encodeResponse(other, 2, true, "another bridge's answer"))
	h.request(1, "read", map[string]any{"text": "real 1"})
	h.request(2, "read", map[string]any{"text": "real 2"})
	h.sweep()
	assert.Equal(t, "real 1", h.mustResponse(1).Content)
	assert.Equal(t, "real 2", h.mustResponse(2).Content)
	assert.Equal(t, 2, h.stats.Calls)
	assert.EqualValues(t, 2, read.runs.Load())
}

func TestHandshakeLeavesNoTempReservationOrRequestFiles(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	for id := int64(1); id <= 5; id++ {
		h.request(id, "read", nil)
	}
	h.request(6, "bash", nil)
	h.requestWithToken(7, "wrong", "read", nil)
	h.sweep()
	for _, name := range h.names() {
		assert.True(t, strings.HasPrefix(name, "res-") && strings.HasSuffix(name, ".json"), "leftover %q", name)
	}
	assert.Len(t, h.names(), 7)
}

func TestResponsesAreCompactASCIIJSON(t *testing.T) {
	tool := &funcTool{name: "read", fn: nil}
	h := newHarness(t, tool)
	tool.fn = textTool("é 😀 \u2028 \x00 \"q\" \\ \xff end").fn
	h.request(1, "read", nil)
	h.sweep()
	raw, err := os.ReadFile(h.path(responseName(1)))
	require.NoError(t, err)
	for _, r := range string(raw) {
		assert.True(t, r < unicode.MaxASCII && r >= 0x20, "non-ASCII or control byte %q in %s", r, raw)
	}
	assert.NotContains(t, string(raw), ": ")
	assert.Equal(t, "é 😀 \u2028 \x00 \"q\" \\ \uFFFD end", h.mustResponse(1).Content)
	assert.Equal(t, int64(len("é 😀 \u2028 \x00 \"q\" \\ \uFFFD end")), h.stats.Bytes, "charged for what the script receives")
}

func TestPlantedFIFOsNeverBlockThePump(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.Symlink(fifo, h.path(unauthenticatedRequest(1))))
	require.NoError(t, syscall.Mkfifo(h.path(RequestName(h.token, 2, nil)), 0o600))
	notify := h.frameName(KindNotify, "1", nil)
	require.NoError(t, syscall.Mkfifo(h.path(notify), 0o600))
	require.NoError(t, syscall.Mkfifo(h.path(h.frameName(KindText, "1", nil)), 0o600))
	require.NoError(t, syscall.Mkfifo(h.path(h.frameName(KindException, "", nil)), 0o600))
	h.request(3, "read", nil)
	h.sweep()
	drainNotifications(h.cfg, &h.stats)

	assert.Equal(t, msgAuthFailed, h.mustResponse(1).Error, "a link to a FIFO is not a readable request")
	_, answered := h.response(2)
	assert.False(t, answered, "a FIFO at a request name is not a request")
	assert.True(t, h.exists(RequestName(h.token, 2, nil)))
	assert.True(t, h.mustResponse(3).OK)
	assert.False(t, h.exists(notify))
	assert.Empty(t, ReadTextBlocks(h.dir, h.token, 65536, nil))
	_, ok := ReadException(h.dir, h.token, nil)
	assert.False(t, ok)
}

func TestSweepWithNilStatsStillAnswers(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.request(1, "read", nil)
	require.NoError(t, sweepOnce(context.Background(), h.cfg, nil))
	assert.True(t, h.mustResponse(1).OK)
}

// A directory whose entries take several getdents buffers (thousands of
// answered calls' responses, long planted names) is still listed whole:
// every request is found and answered, and no other name is taken for one.
func TestSweepFindsEveryRequestInADirectoryLargerThanOneListingBuffer(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.MaxRequestsPerSweep = 100
	long := strings.Repeat("x", 200)
	for i := range 3000 {
		h.publish(responseName(int64(100000+i)), []byte(`{}`))
		if i%10 == 0 {
			h.publish("text-"+long+"-"+strings.Repeat("y", i%50)+".json", []byte(`{}`))
		}
	}
	ids := []int64{1, 1500, 2999, 77}
	for _, id := range ids {
		h.request(id, "read", map[string]any{"text": "hi"})
	}
	h.sweep()
	for _, id := range ids {
		assert.True(t, h.mustResponse(id).OK, "request %d", id)
	}
	assert.Equal(t, len(ids), h.stats.Calls)
}
