package kernelworker

import (
	"strconv"
	"strings"

	"github.com/executecode/executecode/internal/proc"
)

// cellKilledBy explains a cell's uncaught exception that a limit caused,
// for details.killed_by, or returns "": a MemoryError under a memory limit,
// an OSError with errno EFBIG under a file size limit (python ignores
// SIGXFSZ). The kernel survives such a cell with its state; the name only
// says which limit the cell ran into, as a per-call run's result does.
func cellKilledBy(e *Exception, lim proc.Limits) string {
	if e == nil || e.Kind != "error" {
		return ""
	}
	errno := 0
	if e.Name == "OSError" {
		errno = messageErrno(e.Message)
	}
	return proc.KilledBy(proc.ExitStatus{}, lim, e.Name, errno)
}

// messageErrno reads the errno of an OSError's message, which python
// words "[Errno N] text"; 0 if it has none. EFBIG has no OSError subclass
// of its own, so the name OSError is the one to look at.
func messageErrno(msg string) int {
	rest, ok := strings.CutPrefix(msg, "[Errno ")
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
