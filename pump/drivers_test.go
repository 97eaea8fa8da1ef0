package pump

import "context"

// The one-shot drivers below exercise a sweep, a recovery, a notification
// drain and an answer on their own, without a server: only the tests run
// them that way; the runtime always goes through Server.

// sweepOnce runs one sweep over cfg.Dir (docs/protocol.md, A helper call,
// step by step): recover orphaned claim markers (with an empty ledger),
// forward notifications, select up to MaxRequestsPerSweep requests, claim
// them serially in ascending id order and dispatch the claims in waves,
// answering each as it is awaited. Stats are updated in place. When ctx ends
// mid-dispatch the sweep stops answering at once, as a killed sweep would:
// its in-flight and pending claims are counted as errors, their markers stay
// for recovery, and ctx's error is returned.
func sweepOnce(ctx context.Context, cfg Config, stats *Stats) error {
	return newSweeper(cfg, bridge{}, stats).run(ctx)
}

// recoverOnce pays each dead claim's debt exactly once (docs/protocol.md,
// Claim markers, the ledger, and recovery): regular-file claim markers
// first, then ledger entries, both deduplicated by the replay memory. It
// writes answers; it never dispatches. Planted directories and symlinks at
// marker names are ignored outright, and a regular marker charges only an id
// this pump claimed (see recoverMarkers). A server runs the same
// recoverDebts after a sweep it abandoned; sweepOnce runs the marker half
// itself with an empty ledger.
func recoverOnce(cfg Config, stats *Stats, ledger claimLedger) error {
	return newSweeper(cfg, bridge{}, stats).recoverDebts(ledger)
}

// drainNotifications is the notification-only pass that ends a run: it
// consumes every notify-<n>-<mac>.json frame present and forwards the
// authenticated ones within the run's 64-message cap. It never touches a
// request.
func drainNotifications(cfg Config, stats *Stats) {
	newSweeper(cfg, bridge{}, stats).drainNotifications()
}

// encodeResponse renders the compact response body, authenticated with
// token. It cannot fail: strings are escaped by hand to pure ASCII (as
// python's json.dump does), with invalid UTF-8 replaced by U+FFFD, so the
// shim decodes the file the same way under any locale.
func encodeResponse(token string, id int64, ok bool, text string) []byte {
	return encodeAnswer(token, id, ok, false, text)
}
