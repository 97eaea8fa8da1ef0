package pump

import (
	"encoding/json"
	"io"
	"os"
	"syscall"
	"unicode/utf8"
)

// Notification caps (bridge.md §5.8).
const (
	maxNotifyFileBytes = 65536
	MaxNotifyForwarded = 64
	MaxNotifyBytes     = 4096
)

// DrainNotifications is the notification-only pass that ends a run: it
// consumes every notify-<n>.json frame present and forwards the valid ones
// within the run's 64-message cap. It never touches a request.
func DrainNotifications(cfg Config, stats *Stats) {
	s := newSweeper(cfg, stats)
	l, err := listDir(s.cfg.Dir)
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("execute_code rpc notification drain failed")
		return
	}
	s.forwardNotifications(l.notifies)
}

// forwardNotifications consumes frames in ascending n. Every frame is
// deleted before it is read; malformed ones are neither forwarded nor
// counted, valid ones beyond the cap are dropped silently.
func (s *sweeper) forwardNotifications(frames []entry) {
	sortEntries(frames)
	for _, e := range frames {
		if !e.valid {
			_ = s.remove(e.name)
			continue
		}
		msg, ok := s.consumeFrame(e)
		if !ok || s.stats.NotifyForwarded >= MaxNotifyForwarded {
			continue
		}
		s.stats.NotifyForwarded++
		if s.cfg.ScrubNotify != nil {
			msg = s.cfg.ScrubNotify(msg)
		}
		s.deliver(capUTF8(msg, MaxNotifyBytes))
	}
}

// consumeFrame opens a regular frame without following links, unlinks its
// name (always, whatever it is) and then reads it through the open file.
func (s *sweeper) consumeFrame(e entry) (string, bool) {
	var f *os.File
	if e.mode.IsRegular() {
		f, _ = os.OpenFile(s.path(e.name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	}
	_ = s.remove(e.name)
	if f == nil {
		return "", false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxNotifyFileBytes {
		return "", false
	}
	body, err := io.ReadAll(io.LimitReader(f, maxNotifyFileBytes+1))
	if err != nil || len(body) > maxNotifyFileBytes || !utf8.Valid(body) {
		return "", false
	}
	var fields map[string]json.RawMessage
	var msg string
	if json.Unmarshal(body, &fields) != nil || !isJSONString(fields["msg"]) || json.Unmarshal(fields["msg"], &msg) != nil {
		return "", false
	}
	return msg, true
}

func (s *sweeper) deliver(msg string) {
	if s.cfg.OnNotify == nil {
		return
	}
	defer func() { _ = recover() }() // a raising callback is swallowed
	s.cfg.OnNotify(msg)
}

// capUTF8 cuts s to at most n bytes, backing off to a rune boundary so the
// result stays valid UTF-8.
func capUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
