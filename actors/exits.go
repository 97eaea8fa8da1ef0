package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/kernelworker"
)

// exitReport is one worker's OnExit report. The worker writes it on its
// own goroutine right before it stops, which is before its Terminated
// reaches the registry; the registry reads it when that Terminated
// arrives. Nothing else is shared.
type exitReport struct {
	mu   sync.Mutex
	exit kernelworker.Exit
	set  bool
}

// chain returns the worker's OnExit: it records the report, then calls
// next (the host's own hook), if any.
func (r *exitReport) chain(next func(kernelworker.Exit)) func(kernelworker.Exit) {
	return func(e kernelworker.Exit) {
		r.mu.Lock()
		r.exit, r.set = e, true
		r.mu.Unlock()
		if next != nil {
			next(e)
		}
	}
}

// exitBook maps each started worker to its report, for the registry's
// ExitOf: a kernel that ended on its own is reported with why it ended
// (docs/architecture.md, Stopping a kernel, and crash reports) rather
// than as an unknown crash.
type exitBook struct {
	mu      sync.Mutex
	reports map[string]*exitReport
}

func newExitBook() *exitBook { return &exitBook{reports: map[string]*exitReport{}} }

func (b *exitBook) book(pid *actor.PID, r *exitReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reports[pidKey(pid)] = r
}

// take returns pid's report and forgets the worker. known is false when
// the worker stopped without reporting (its actor was stopped by force).
func (b *exitBook) take(pid *actor.PID) (kernelworker.Exit, bool) {
	b.mu.Lock()
	r, ok := b.reports[pidKey(pid)]
	delete(b.reports, pidKey(pid))
	b.mu.Unlock()
	if !ok {
		return kernelworker.Exit{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exit, r.set
}

func pidKey(pid *actor.PID) string { return pid.Address + "/" + pid.Id }
