package pump

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/approval"
)

// claim is a dispatch-bound request whose marker is published.
type claim struct {
	id     int64
	tool   string
	params map[string]any
	// approvalID names this call's prompt, if it ever gets one. It is
	// allocated at claim time, before the dispatch exists, so it names
	// exactly this call (docs/protocol.md, Approvals); every claim gets
	// one, gated or not.
	approvalID string
	// gated says the call needs approval before it runs.
	gated bool
	// claimed is when the marker was published: a round trip's start.
	claimed time.Time
}

func (s *sweeper) run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // a killed sweep touches nothing
	}
	// The sweep's context ends when the sweep does, however it ends: its
	// Done is the "sweep died" an approval watcher waits for.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.names != nil {
		return s.dispatch(ctx, s.claimNamed(ctx))
	}
	l, err := listDir(s.cfg.Dir)
	if err != nil {
		return err
	}
	s.recoverMarkers(l.markers, nil)
	s.forwardNotifications(l.notifies)

	sortEntries(l.requests)
	selected := l.requests[:min(len(l.requests), s.cfg.MaxRequestsPerSweep)]
	claims := make([]claim, 0, len(selected))
	for _, e := range selected {
		if ctx.Err() != nil {
			break // unclaimed requests stay on disk for the next sweep
		}
		if !e.valid {
			_ = s.remove(e.name)
			continue
		}
		body, err := readBounded(s.path(e.name), true, maxRequestBytes)
		if c, ok := s.claim(e, body, err, -1); ok {
			claims = append(claims, c)
		}
	}
	return s.dispatch(ctx, claims)
}

// claimNamed is a sweep of the requests the bell named, without a
// listing (docs/protocol.md, Doorbells). A name is the script's word, so
// it only says which file to open: the file is then read and claimed
// exactly as a listed one. What a name does not lead to, a regular file
// under a request name the shim writes, is left for the next listing,
// which handles it as it always did: a name of no such file, a symlink,
// a FIFO or a directory, a name without a MAC. The names are deduplicated
// and claimed in ascending id, at most MaxRequestsPerSweep of them, as a
// listing selects.
func (s *sweeper) claimNamed(ctx context.Context) []claim {
	requests := make([]entry, 0, len(s.names))
	for _, n := range s.names {
		name := reqPrefix + n + jsonSuffix
		f, _ := parseFrameName(name, reqPrefix)
		if !f.numbered || f.mac == "" {
			continue
		}
		requests = append(requests, entry{name: name, n: f.n, valid: true, num: f.num, mac: f.mac})
	}
	sortEntries(requests)
	requests = slices.CompactFunc(requests, func(a, b entry) bool { return a.name == b.name })
	selected := requests[:min(len(requests), s.cfg.MaxRequestsPerSweep)]
	claims := make([]claim, 0, len(selected))
	for _, e := range selected {
		if ctx.Err() != nil {
			break
		}
		// Never followed: a listing would keep a symlink and refuse it
		// as unauthenticated, and it is left to one.
		if c, ok := s.claimNamedOne(e); ok {
			claims = append(claims, c)
		}
	}
	return claims
}

// claimNamedOne reads and claims one named request, closing the
// descriptor it read the request from however the claim ends.
func (s *sweeper) claimNamedOne(e entry) (claim, bool) {
	body, fd, err := readBoundedFD(s.path(e.name), false, maxRequestBytes)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, errNotRegular) {
		return claim{}, false
	}
	if fd >= 0 {
		defer unix.Close(fd)
	}
	return s.claim(e, body, err, fd)
}

// claim runs the claim step (docs/protocol.md, A helper call, step by
// step) for one request file. Every request it does not return
// as a claim is answered (the answer written before the request is
// deleted), except one already answered, which is dropped silently, and
// one that fails authentication while something sits at its response
// name: an unauthenticated file must never replace a real answer. The
// answer to an unauthenticated request is itself unauthenticated. src is
// the open descriptor the body was read from, or -1 (see mark).
func (s *sweeper) claim(e entry, body []byte, err error, src int) (claim, bool) {
	id := e.n
	if errors.Is(err, fs.ErrNotExist) {
		return claim{}, false // withdrawn since the listing: nothing to answer
	}
	var req validRequest
	if err == nil {
		req, err = parseRequest(s.cfg.Token, e.num, e.mac, body)
	}
	if err != nil && !errors.Is(err, errInvalid) {
		// Never remembered either: a planted request must not make the
		// script's own call of that id a replay.
		s.refuseUnauthenticated(id)
		_ = s.remove(e.name)
		s.stats.Denied++
		observe(s.cfg.OnAuthFailure)
		return claim{}, false
	}
	if s.answered(id) {
		_ = s.remove(e.name)
		s.stats.remember(id)
		return claim{}, false
	}
	return s.claimAuthenticated(e, req, err, src)
}

// claimAuthenticated is the claim step after authentication, guarded: a
// panic inside (a policy, say) answers "rpc request failed" with the id
// remembered and no call charged.
func (s *sweeper) claimAuthenticated(e entry, req validRequest, parseErr error, src int) (c claim, ok bool) {
	id, stats := e.n, s.stats
	calls, errs, denied := stats.Calls, stats.Errors, stats.Denied
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logger.Warn().Int64("id", id).Str("panic", typeName(r)).
				Msg("execute_code rpc claim failed; answering rpc request failed")
			stats.Calls, stats.Errors, stats.Denied = calls, errs, denied
			s.answer(id, msgRequestFailed)
			_ = s.remove(e.name)
			stats.remember(id)
			stats.Errors++
			c, ok = claim{}, false
		}
	}()
	refuse := func(msg string) {
		s.answer(id, msg)
		_ = s.remove(e.name)
	}

	if stats.seen(id) {
		refuse(msgReplayed)
		stats.Errors++
		return claim{}, false
	}
	if stats.Calls >= s.cfg.MaxCalls {
		refuse(msgCallLimit(s.cfg.MaxCalls))
		stats.remember(id)
		stats.Errors++
		return claim{}, false
	}
	// The ledger hears of the reservation before the spend, so no kill
	// can spend a call the ledger cannot prove.
	feedLedger(&s.cfg, id, claimReserved, "")
	stats.remember(id)
	stats.Calls++

	if parseErr != nil {
		feedLedger(&s.cfg, id, claimInvalid, "")
		refuse(msgInvalid)
		stats.Errors++
		return claim{}, false
	}
	refusal, byPolicy, gated := s.cfg.verdict(req.Tool)
	switch {
	case byPolicy:
		feedLedger(&s.cfg, id, claimDenied, req.Tool)
		refuse(refusal)
		stats.Denied++
		return claim{}, false
	case refusal != "":
		feedLedger(&s.cfg, id, claimUnknownTool, req.Tool)
		refuse(refusal)
		stats.Errors++
		return claim{}, false
	}

	// Ledger first: it must be a superset of the published markers.
	feedLedger(&s.cfg, id, claimClaimed, req.Tool)
	marker := markerName(id)
	switch s.mark(e.name, marker, src) {
	case markFailed:
		refuse(msgNotMarked)
		stats.Errors++
		return claim{}, false
	case markNotRegular:
		// A symlinked request became a symlink marker: a marker must be
		// evidence the script cannot redirect.
		s.answer(id, msgNotMarked)
		_ = s.remove(marker)
		stats.Errors++
		return claim{}, false
	}
	return claim{id: id, tool: req.Tool, params: req.Params, approvalID: approval.NewID(), gated: gated, claimed: time.Now()}, true
}

// markResult is how publishing a claim marker went.
type markResult int

const (
	marked         markResult = iota
	markFailed                // no marker: the request could not be moved
	markNotRegular            // a marker that is no regular file was made
)

// flinkRefused is set once the kernel refused to link an open descriptor
// (linkat with AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH before Linux
// 6.10): every claim renames from then on.
var flinkRefused atomic.Bool

// mark publishes the claim marker of the request file name. With src,
// the descriptor the request was read from, the marker is a hard link to
// that very file, a regular file the pump authenticated, so it needs no
// lstat, and the request's name goes after it: two directory operations
// where a rename and an lstat took longer (docs/decisions.md). Without
// one, or when the link fails (the kernel refuses it, something sits at
// the marker's name, the request was withdrawn), the request is renamed
// to the marker and the marker checked, as a listing's claim always is:
// a rename moves a symlink as it is.
func (s *sweeper) mark(name, marker string, src int) markResult {
	if src >= 0 && !flinkRefused.Load() {
		_, err := ignoringEINTR(func() (int, error) {
			return 0, unix.Linkat(src, "", unix.AT_FDCWD, s.path(marker), unix.AT_EMPTY_PATH)
		})
		if err == nil {
			s.progress++
			_ = s.remove(name)
			return marked
		}
		if err == unix.ENOENT || err == unix.EPERM {
			// ENOENT is also a file unlinked since it was read: only a
			// file still linked tells a refusing kernel.
			var st unix.Stat_t
			if unix.Fstat(src, &st) == nil && st.Nlink > 0 {
				flinkRefused.Store(true)
			}
		}
	}
	if err := os.Rename(s.path(name), s.path(marker)); err != nil {
		return markFailed
	}
	s.progress++
	if !isRegular(s.path(marker)) {
		return markNotRegular
	}
	return marked
}
