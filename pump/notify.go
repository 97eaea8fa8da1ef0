package pump

import (
	"encoding/json"
	"io"
	"os"
	"sync"
	"syscall"
	"unicode/utf8"
)

// Notification caps (docs/protocol.md, Budgets).
const (
	maxNotifyFileBytes = 65536
	maxNotifyForwarded = 64
	maxNotifyBytes     = 4096
)

func (s *sweeper) drainNotifications() {
	l, err := listDir(s.cfg.Dir)
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("execute_code rpc notification drain failed")
		return
	}
	s.forwardNotifications(l.notifies)
}

// drainListing is a server's last look at its directory before its stats
// are read (DrainAndStats, Stop, a run's end): it forwards the
// notifications and settles the markers no sweep settled, as a sweep's
// listing would. A named call's sweep lists nothing, so a marker planted
// beside it is found here at the latest and counted. The markers of ids
// already charged are left alone: they are an ended run's abandoned
// claims, left for its teardown. Requests are never claimed here.
func (s *sweeper) drainListing() {
	l, err := listDir(s.cfg.Dir)
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("execute_code rpc notification drain failed")
		return
	}
	unsettled := l.markers[:0]
	for _, e := range l.markers {
		if !e.valid || !s.stats.seen(e.n) {
			unsettled = append(unsettled, e)
		}
	}
	s.recoverMarkers(unsettled, nil)
	s.forwardNotifications(l.notifies)
}

// forwardNotifications consumes frames in ascending n. Every frame is
// deleted before it is read. One whose name or MAC fails, or that repeats
// a number already forwarded (a genuine frame copied back after it was
// consumed), is refused and counted; a malformed body under a valid MAC
// is neither forwarded nor counted; valid ones beyond the cap are dropped
// silently.
func (s *sweeper) forwardNotifications(frames []entry) {
	sortEntries(frames)
	for _, e := range frames {
		msg, status := s.consumeFrame(e)
		switch {
		case status == frameRefused:
			s.refuseFrame()
			continue
		case status == frameMalformed || s.stats.NotifyForwarded >= maxNotifyForwarded:
			continue
		case !s.bridge.notified.first(e.n):
			s.refuseFrame()
			continue
		}
		s.stats.NotifyForwarded++
		if s.cfg.ScrubNotify != nil {
			msg = s.cfg.ScrubNotify(msg)
		}
		s.deliver(capUTF8(msg, maxNotifyBytes))
	}
}

type frameStatus int

const (
	frameOK frameStatus = iota
	frameMalformed
	frameRefused
)

// consumeFrame opens a regular frame without following links, unlinks its
// name (always, whatever it is) and then reads it through the open file.
// Only a frame whose MAC authenticates its body is more than refused.
func (s *sweeper) consumeFrame(e entry) (string, frameStatus) {
	var f *os.File
	if e.valid && e.mode.IsRegular() {
		f, _ = os.OpenFile(s.path(e.name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	}
	_ = s.remove(e.name)
	if f == nil {
		return "", frameRefused
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxNotifyFileBytes {
		return "", frameRefused
	}
	body, err := io.ReadAll(io.LimitReader(f, maxNotifyFileBytes+1))
	if err != nil || len(body) > maxNotifyFileBytes || !validMAC(s.cfg.Token, KindNotify, e.num, body, e.mac) {
		return "", frameRefused
	}
	if !utf8.Valid(body) {
		return "", frameMalformed
	}
	var fields map[string]json.RawMessage
	var msg string
	if json.Unmarshal(body, &fields) != nil || !isJSONString(fields["msg"]) || json.Unmarshal(fields["msg"], &msg) != nil {
		return "", frameMalformed
	}
	return msg, frameOK
}

// refuseFrame counts one frame that failed authentication.
func (s *sweeper) refuseFrame() { observe(s.cfg.OnFrameRefused) }

// notifyMemory is a bridge's record of the notification numbers it
// forwarded, so a consumed frame copied back is refused. It lives outside
// Stats because every sweep of the bridge, an abandoned one still running
// included, must see it, and at most maxNotifyForwarded numbers are ever
// recorded.
type notifyMemory struct {
	mu   sync.Mutex
	seen map[int64]struct{}
}

// first records n and reports whether it was new. A nil memory (a lone
// drainNotifications of a test) remembers nothing.
func (m *notifyMemory) first(n int64) bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.seen[n]; dup {
		return false
	}
	if m.seen == nil {
		m.seen = map[int64]struct{}{}
	}
	m.seen[n] = struct{}{}
	return true
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
