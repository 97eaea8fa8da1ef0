package pump

import "time"

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
