package pump

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		h.publish(fmt.Sprintf("notify-%d.json", n), notifyFrame(t, n, fmt.Sprintf("m%d", n)))
	}
	h.sweep()
	assert.Equal(t, []string{"m1", "m2", "m3", "m10"}, *got)
	assert.Equal(t, 4, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
}

func TestFinalDrainForwardsTheLastNotification(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	h.publish("notify-1.json", notifyFrame(t, 1, "bye"))
	h.request(1, "read", nil)
	DrainNotifications(h.cfg, &h.stats)
	assert.Equal(t, []string{"bye"}, *got)
	assert.Equal(t, 1, h.stats.NotifyForwarded)
	assert.True(t, h.exists(RequestName(1)), "the drain never touches requests")
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
			h.publish(fmt.Sprintf("notify-%d.json", n), notifyFrame(t, n, fmt.Sprint(n)))
		}
	}
	write(40)
	h.sweep()
	write(40)
	h.sweep()
	write(5)
	DrainNotifications(h.cfg, &h.stats)
	assert.Len(t, *got, 64)
	assert.Equal(t, "64", (*got)[63])
	assert.Equal(t, 64, h.stats.NotifyForwarded)
	assert.Empty(t, h.names(), "frames beyond the cap are consumed too")
}

func TestMalformedNotificationsAreConsumedWithoutCounting(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	h.publish("notify-1.json", []byte(`{not json`))
	h.publish("notify-2.json", []byte(`["msg"]`))
	h.publish("notify-3.json", []byte(`{"n": 3, "message": "wrong key"}`))
	h.publish("notify-4.json", []byte(`{"n": 4, "msg": 4}`))
	h.publish("notify-5.json", []byte(`{"n": 5, "msg": null}`))
	big := `{"n": 6, "msg": "` + strings.Repeat("a", 65536) + `"}`
	h.publish("notify-6.json", []byte(big))
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, notifyFrame(t, 7, "via link"), 0o600))
	require.NoError(t, os.Symlink(target, h.path("notify-7.json")))
	h.publish("notify-8.json", []byte("{\"n\": 8, \"msg\": \"\xff\"}"))
	h.publish("notify-x.json", notifyFrame(t, 0, "bad name"))
	h.publish("notify-9.json", notifyFrame(t, 9, "valid"))
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
	h.publish("notify-1.json", notifyFrame(t, 1, msg))
	h.sweep()
	require.Len(t, *got, 1)
	assert.Len(t, (*got)[0], MaxNotifyBytes)
}

func TestLongNotificationsAreCutTo4096BytesAtARuneBoundary(t *testing.T) {
	h := newHarness(t)
	got := h.collect()
	h.publish("notify-1.json", notifyFrame(t, 1, strings.Repeat("z", 10000)))
	h.publish("notify-2.json", notifyFrame(t, 2, "a"+strings.Repeat("é", 3000)))
	h.sweep()
	require.Len(t, *got, 2)
	assert.Equal(t, strings.Repeat("z", 4096), (*got)[0])
	assert.Equal(t, "a"+strings.Repeat("é", 2047), (*got)[1], "4,096 would split a two-byte rune")
}

func TestNotificationsWithoutACallbackAreStillConsumedAndCounted(t *testing.T) {
	h := newHarness(t)
	for n := 1; n <= 3; n++ {
		h.publish(fmt.Sprintf("notify-%d.json", n), notifyFrame(t, n, "x"))
	}
	h.sweep()
	assert.Equal(t, 3, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
}

func TestAPanickingNotifyCallbackIsSwallowed(t *testing.T) {
	h := newHarness(t)
	h.cfg.OnNotify = func(string) { panic("ui gone") }
	h.publish("notify-1.json", notifyFrame(t, 1, "x"))
	h.publish("notify-2.json", notifyFrame(t, 2, "y"))
	h.sweep()
	assert.Equal(t, 2, h.stats.NotifyForwarded)
	assert.Empty(t, h.names())
}

func TestNotificationDirectoriesAreNeverRemoved(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, os.MkdirAll(h.path("notify-1.json/inner"), 0o700))
	require.NoError(t, os.MkdirAll(h.path("notify-q.json"), 0o700))
	h.sweep()
	DrainNotifications(h.cfg, &h.stats)
	assert.DirExists(t, h.path("notify-1.json/inner"))
	assert.DirExists(t, h.path("notify-q.json"))
	assert.Zero(t, h.stats.NotifyForwarded)
}
