package pump

import "time"

// RoundTrip is one answered helper call, for metrics: which helper, how
// long from its claim to its published answer (an approval wait
// included), and how it ended. It carries no argument, content or id.
type RoundTrip struct {
	Tool     string
	Duration time.Duration
	Outcome  RoundTripOutcome
}

// RoundTripOutcome is how an answered helper call ended.
type RoundTripOutcome string

const (
	// RoundTripOK: the tool's content was accepted.
	RoundTripOK RoundTripOutcome = "ok"
	// RoundTripError: the tool failed, or its result broke the budget.
	RoundTripError RoundTripOutcome = "error"
	// RoundTripDenied: approval refused the call.
	RoundTripDenied RoundTripOutcome = "denied"
)

// reportRoundTrip tells OnRoundTrip of one answered call of tool, claimed
// at since.
func reportRoundTrip(cfg *Config, tool string, since time.Time, ok, blocked bool) {
	if cfg.OnRoundTrip == nil {
		return
	}
	rt := RoundTrip{Tool: tool, Duration: time.Since(since), Outcome: roundTripOutcome(ok, blocked)}
	defer func() { _ = recover() }()
	cfg.OnRoundTrip(rt)
}

// roundTripOutcome names how an answered call went: its content accepted
// (ok), refused by approval (blocked), or failed.
func roundTripOutcome(ok, blocked bool) RoundTripOutcome {
	switch {
	case ok:
		return RoundTripOK
	case blocked:
		return RoundTripDenied
	}
	return RoundTripError
}

// observe calls an optional observer, swallowing its panic: an observer
// never changes what the bridge answers.
func observe(f func()) {
	if f == nil {
		return
	}
	defer func() { _ = recover() }()
	f()
}
