package pump

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notifyFrame is the frame the shim writes (python's json.dump layout).
func notifyFrame(t *testing.T, n int, msg string) []byte {
	return []byte(fmt.Sprintf(`{"n": %d, "msg": %s}`, n, mustJSON(t, msg)))
}

func (h *harness) collect() *[]string {
	var got []string
	h.cfg.OnNotify = func(msg string) { got = append(got, msg) }
	return &got
}

func TestNotificationsAreForwardedInOrderAndDeleted(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	for _, n := range []int{3, 1, 10, 2} {
		h.frame(KindNotify, n, notifyFrame(t, n, fmt.Sprintf("m%d", n)))
	}
	h.sweep()
	assert.Equal(t, []string{"m1", "m2", "m3", "m10"}, *got)
	assert.Equal(t, 4, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
}

func TestFinalDrainForwardsTheLastNotification(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	h.frame(KindNotify, 1, notifyFrame(t, 1, "bye"))
	h.request(1, "read", nil)
	drainNotifications(h.cfg, &h.stats)
	assert.Equal(t, []string{"bye"}, *got)
	assert.Equal(t, 1, h.stats.NotifyForwarded)
	assert.True(t, h.exists(h.reqName(1)), "the drain never touches requests")
	_, answered := h.response(1)
	assert.False(t, answered)
}

func TestAtMost64NotificationsAreForwardedAcrossSweepsAndTheDrain(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	n := 0
	write := func(k int) {
		for range k {
			n++
			h.frame(KindNotify, n, notifyFrame(t, n, fmt.Sprint(n)))
		}
	}
	write(40)
	h.sweep()
	write(40)
	h.sweep()
	write(5)
	drainNotifications(h.cfg, &h.stats)
	assert.Len(t, *got, 64)
	assert.Equal(t, "64", (*got)[63])
	assert.Equal(t, 64, h.stats.NotifyForwarded)
	assert.Empty(t, h.names(), "frames beyond the cap are consumed too")
}

func TestMalformedNotificationsAreConsumedWithoutCounting(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	h.frame(KindNotify, 1, []byte(`{not json`))
	h.frame(KindNotify, 2, []byte(`["msg"]`))
	h.frame(KindNotify, 3, []byte(`{"n": 3, "message": "wrong key"}`))
	h.frame(KindNotify, 4, []byte(`{"n": 4, "msg": 4}`))
	h.frame(KindNotify, 5, []byte(`{"n": 5, "msg": null}`))
	big := `{"n": 6, "msg": "` + strings.Repeat("a", 65536) + `"}`
	h.frame(KindNotify, 6, []byte(big))
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, notifyFrame(t, 7, "via link"), 0o600))
	require.NoError(t, os.Symlink(target, h.path(h.frameName(KindNotify, "7", notifyFrame(t, 7, "via link")))))
	h.frame(KindNotify, 8, []byte("{\"n\": 8, \"msg\": \"\xff\"}"))
	h.publish("notify-x.json", notifyFrame(t, 0, "bad name"))
	h.frame(KindNotify, 9, notifyFrame(t, 9, "valid"))
	h.sweep()

	assert.Equal(t, []string{"valid"}, *got)
	assert.Equal(t, 1, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, notifyFrame(t, 7, "via link"), data, "a link is unlinked, its target untouched")
}

func TestNotificationUnderTheFileCapIsForwarded(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	msg := strings.Repeat("b", 65536-len(`{"n": 1, "msg": ""}`))
	h.frame(KindNotify, 1, notifyFrame(t, 1, msg))
	h.sweep()
	require.Len(t, *got, 1)
	assert.Len(t, (*got)[0], maxNotifyBytes)
}

func TestLongNotificationsAreCutTo4096BytesAtARuneBoundary(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	h.frame(KindNotify, 1, notifyFrame(t, 1, strings.Repeat("z", 10000)))
	h.frame(KindNotify, 2, notifyFrame(t, 2, "a"+strings.Repeat("é", 3000)))
	h.sweep()
	require.Len(t, *got, 2)
	assert.Equal(t, strings.Repeat("z", 4096), (*got)[0])
	assert.Equal(t, "a"+strings.Repeat("é", 2047), (*got)[1], "4,096 would split a two-byte rune")
}

func TestNotificationsWithoutACallbackAreStillConsumedAndCounted(t *testing.T) {
	h := newHarness(t)
	for n := 1; n <= 3; n++ {
		h.frame(KindNotify, n, notifyFrame(t, n, "x"))
	}
	h.sweep()
	assert.Equal(t, 3, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
}

func TestAPanickingNotifyCallbackIsSwallowed(t *testing.T) {
	h := newHarness(t)
	h.cfg.OnNotify = func(string) { panic("ui gone") }
	h.frame(KindNotify, 1, notifyFrame(t, 1, "x"))
	h.frame(KindNotify, 2, notifyFrame(t, 2, "y"))
	h.sweep()
	assert.Equal(t, 2, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
}

func TestNotificationDirectoriesAreNeverRemoved(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, os.MkdirAll(h.path("notify-1.json/inner"), 0o700))
	require.NoError(t, os.MkdirAll(h.path("notify-q.json"), 0o700))
	h.sweep()
	drainNotifications(h.cfg, &h.stats)
	assert.DirExists(t, h.path("notify-1.json/inner"))
	assert.DirExists(t, h.path("notify-q.json"))
	assert.Zero(t, h.stats.NotifyForwarded)
}

// Frames another session's script plants (it can list the shared staging
// root, but has no token) never reach the callback: a name without a MAC,
// a MAC under another token, a genuine frame's body under another number
// or as another kind. Each is counted once; the genuine frame is
// forwarded.
func TestUnauthenticatedNotificationsAreRefusedAndCounted(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	refused := 0
	h.cfg.OnFrameRefused = func() { refused++ }
	other, err := NewToken()
	require.NoError(t, err)
	genuine := notifyFrame(t, 1, "mine")
	h.frame(KindNotify, 1, genuine)
	h.publish("notify-2.json", notifyFrame(t, 2, "no mac"))
	h.publish(FrameName(KindNotify, "3", FrameMAC(other, KindNotify, "3", notifyFrame(t, 3, "other key"))), notifyFrame(t, 3, "other key"))
	h.publish(FrameName(KindNotify, "4", FrameMAC(h.token, KindNotify, "1", genuine)), genuine)
	h.publish(FrameName(KindNotify, "5", FrameMAC(h.token, KindText, "5", genuine)), genuine)
	h.publish("notify-6-"+strings.Repeat("0", macLen)+".json", notifyFrame(t, 6, "zero mac"))
	h.sweep()

	assert.Equal(t, []string{"mine"}, *got)
	assert.Equal(t, 1, h.stats.NotifyForwarded, "refused frames do not count against the cap")
	assert.Equal(t, 5, refused)
	assert.Empty(t, h.names(), "refused frames are consumed too")
}

// A genuine frame copied back after the pump consumed it (a script that
// watched the directory) is refused: a number is forwarded once per
// bridge, across sweeps and the final drain.
func TestACopiedBackNotificationIsRefusedAndCounted(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	refused := 0
	h.cfg.OnFrameRefused = func() { refused++ }
	h.bridge.notified = &notifyMemory{}
	body := notifyFrame(t, 1, "once")
	h.frame(KindNotify, 1, body)
	h.sweep()
	h.frame(KindNotify, 1, body)
	h.sweep()
	h.frame(KindNotify, 1, body)
	h.drainNotifications()
	assert.Equal(t, []string{"once"}, *got)
	assert.Equal(t, 2, refused)
	assert.Equal(t, 1, h.stats.NotifyForwarded)
}

func TestARunRefusesACopiedBackNotification(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	refused := 0
	h.cfg.OnFrameRefused = func() { refused++ }
	h.cfg.PollInterval = time.Millisecond
	body := notifyFrame(t, 1, "once")
	name := h.frame(KindNotify, 1, body)
	exited := make(chan struct{})
	done := h.runAsync(context.Background(), exited)
	waitFor(t, "the frame to be consumed", func() bool { return !h.exists(name) })
	h.frame(KindNotify, 1, body)
	close(exited)
	st := <-done
	assert.Equal(t, []string{"once"}, *got)
	assert.Equal(t, 1, st.NotifyForwarded)
	assert.Equal(t, 1, refused)
}
