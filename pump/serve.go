package pump

import (
	"context"
	"time"
)

// Serve is the per-call loop (docs/protocol.md, Per-call runs; woken by
// the doorbells).
// It sweeps on each doorbell wake-up and on the fallback timer until
// exited is closed, then runs ONE notification-only drain and returns the
// run's stats. Requests still on disk when the script has exited are never
// dispatched: they belong to nobody who waits.
//
// Flood resistance: wake-ups are coalesced by the bell, and wake-up sweeps
// that consume nothing open a backoff window in which further wake-ups
// wait (see wakeGate). A pending wake-up is kept, not lost, so a real
// request is swept at the latest when the window ends. The fallback timer
// always sweeps.
//
// When ctx ends (the run's timeout or cancel), in-flight dispatches are
// cancelled through their contexts and Serve stops sweeping; it returns
// after the drain once exited is closed.
func Serve(ctx context.Context, cfg Config, exited <-chan struct{}) Stats {
	cfg = cfg.settled()
	cfg.notified = &notifyMemory{}
	stats := NewStats()
	finish := func() Stats {
		DrainNotifications(cfg, &stats)
		return stats
	}

	poll := time.NewTimer(cfg.PollInterval)
	defer poll.Stop()
	gate := wakeGate{max: cfg.PollInterval}
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	paused := false // pause is armed: wake-ups wait for it

	for {
		// Exit wins every race: a request published as the script ended
		// must not be swept.
		select {
		case <-exited:
			return finish()
		default:
		}
		if ctx.Err() != nil {
			<-exited
			return finish()
		}

		wake := cfg.Bells.Wake()
		var pauseC <-chan time.Time
		if paused {
			wake, pauseC = nil, pause.C
		}
		fromWake := false
		select {
		case <-exited:
			return finish()
		case <-ctx.Done():
			continue
		case <-pauseC:
			paused = false
			continue
		case <-wake:
			fromWake = true
		case <-poll.C:
		}
		select {
		case <-exited:
			return finish()
		default:
		}

		s := newSweeper(cfg, &stats)
		if err := s.run(ctx); err != nil && ctx.Err() == nil {
			cfg.Logger.Warn().Err(err).Msg("execute_code rpc sweep failed")
		}
		if cfg.onSweep != nil {
			cfg.onSweep(s.progress)
		}
		if s.progress > 0 {
			pause.Stop()
			paused = false
		}
		if d := gate.after(fromWake, s.progress); d > 0 {
			pause.Reset(d)
			paused = true
		}
		poll.Reset(cfg.PollInterval)
	}
}

// minBackoff is the first pause after spurious wake-ups; it doubles up to
// the fallback poll interval.
const minBackoff = time.Millisecond

// wakeGate decides how long wake-ups are ignored after a sweep. A sweep
// that consumed something resets it. A wake-up sweep that consumed nothing
// is spurious: the first of a streak is forgiven (a ring can trail the
// sweep that already served its request, as in a batch), each further one
// holds wake-ups for 1 ms, 2 ms, 4 ms … up to max. A flood of rings thus
// costs a handful of sweeps, not one per drain of the bell.
type wakeGate struct {
	max    time.Duration
	streak int
	window time.Duration
}

func (g *wakeGate) after(fromWake bool, progress int) time.Duration {
	switch {
	case progress > 0:
		g.streak, g.window = 0, 0
		return 0
	case !fromWake:
		return 0 // the fallback timer found nothing: no ring to distrust
	}
	g.streak++
	if g.streak == 1 {
		return 0
	}
	g.window = min(max(2*g.window, minBackoff), g.max)
	return g.window
}
