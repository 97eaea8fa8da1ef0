package pump

import (
	"syscall"
	"time"
)

// bridge is what every sweep of one bridge shares beyond its Config: a
// Server makes one for its sweeps. The tests' one-shot drivers
// (drivers_test.go) run with the zero value, which remembers nothing
// between calls. None of it is in Config, so a caller can neither set it
// nor see it.
type bridge struct {
	// notified is the memory of forwarded notification numbers, shared
	// by every sweep of the bridge and its drains.
	notified *notifyMemory
	// tasks counts the dispatch goroutines, so a Server's Stop can wait
	// for the last one. Nil counts nothing.
	tasks *taskGroup
	// claimed says whether this pump claimed id in a sweep whose
	// accounting is not settled yet (a Server's live ledger), and for
	// which tool. Without it only the stats' replay memory proves a
	// claim.
	claimed func(id int64) (tool string, ok bool)
	// unlink is the plain unlink every hygiene deletion goes through.
	unlink func(path string) error
}

// settled fills in the production unlink.
func (b bridge) settled() bridge {
	if b.unlink == nil {
		// syscall.Unlink, not os.Remove: os.Remove falls back to rmdir,
		// and a directory planted under a protocol name must stay for
		// teardown.
		b.unlink = syscall.Unlink
	}
	return b
}

// hooks are the seams this package's tests reach a server through. The
// zero value is the runtime's own behaviour; nothing outside the package
// can set them.
type hooks struct {
	// unlink replaces the plain unlink of every hygiene deletion, so a
	// test can make one fail (or fault).
	unlink func(path string) error
	// onSweep is told how much work each settled sweep found.
	onSweep func(work int)
	// onStale is told of each abandoned sweep's late result the server
	// refused.
	onStale func(gen uint64)
	// killGrace bounds how long a server waits for a cancelled sweep to
	// return before abandoning it; 0 means defaultKillGrace.
	killGrace time.Duration
}

const defaultKillGrace = time.Second

func (h hooks) settled() hooks {
	if h.killGrace <= 0 {
		h.killGrace = defaultKillGrace
	}
	return h
}
