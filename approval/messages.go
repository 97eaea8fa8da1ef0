package approval

// Messages of the broker actor. Requests from the Broker wrapper travel
// with protoactor request/response; the rest are sent.

// register asks for a prompt (or a stored answer). done is the waiter's
// channel: whoever takes the record puts the one settlement in it, before
// answering anyone.
type register struct {
	req  Request
	hash string
	done chan settlement
}

// registered answers register: either a stored approval answered
// (answered), or the prompt is pending under serial, or err.
type registered struct {
	answered bool
	outcome  Outcome
	serial   uint64
	err      error
}

// settlement is what a waiter receives when its record is taken.
type settlement struct {
	outcome Outcome
	err     error
}

// resolve is Broker.Resolve.
type resolve struct {
	id       string
	decision Decision
}

// cancel is Broker.Cancel (serial 0: whatever prompt has the id) or the
// waiter's own cancel when its context ends (its serial).
type cancel struct {
	id     string
	serial uint64
	reason string
}

// expire is the waiter's timeout.
type expire struct {
	id     string
	serial uint64
}

// transitionReply answers resolve, cancel and expire: nil for the winner,
// ErrNotPending for every loser.
type transitionReply struct{ err error }

// approverAnswered is sent by the goroutine that asked the Approver.
type approverAnswered struct {
	id       string
	serial   uint64
	decision Decision
	err      error
	failure  string // bounded class of a failure, for the log line
}

// pendingQuery asks for the number of pending prompts (a pendingCount).
type pendingQuery struct{}

type pendingCount struct{ n int }

// watch asks the broker to spawn a watcher for id.
type watch struct {
	id              string
	sweep, dispatch <-chan struct{}
}

// Messages of a watcher actor.
type (
	// ended: the sweep's or the dispatch's channel closed.
	ended struct{ which string }
)

// watchStep is what Config.watchHook sees: a cancel's answer after the
// sweep's or the dispatch's end (which, err), or the watcher's stop
// (which "stopped").
type watchStep struct {
	id    string
	which string
	err   error
}
