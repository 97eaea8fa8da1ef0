package kernelworker

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// hangGuard only keeps a broken test from hanging; no test asserts a time.
const hangGuard = 20 * time.Second

func TestMain(m *testing.M) {
	// Orphans of the groups under test are re-parented to this process,
	// so tests can reap them and then see their group as truly empty
	// (kill(-pgid, 0) == ESRCH) instead of as zombies under init.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "set child subreaper:", err)
		os.Exit(1)
	}
	// protoactor throttles dead-letter logging with a goroutine that lives
	// one throttle period (1 s) after a dead letter, and a message racing
	// a worker's stop can always become one. That library goroutine is the
	// only one ignored.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(
		"github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
