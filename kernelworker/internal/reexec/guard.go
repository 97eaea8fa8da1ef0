package reexec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/executecode/executecode/internal/privfs"
)

// The guard is this binary re-executed with GuardEnv set and the host's
// pid as argv[1], in a session of its own, with the read end of the
// host's pipe as its stdin (the host's side is kernelworker's guard.go).
// Lines on the pipe register and end the sessions of the host's children
// and name the host's staging roots.
const (
	GuardEnv   = "EXECUTE_CODE_GUARD"
	GuardArgv0 = "execute-code-guard"
)

// The operations of a guard line.
const (
	GuardAdd    = '+' // "+<sid>": a child's session to kill should the host die
	GuardForget = '-' // "-<sid>": the host swept that session itself
	GuardSweep  = '!' // "!<sid>": the host's sweep ran out of time; sweep it here
	GuardRoot   = 'r' // "r<quoted path>": a staging root to remove should the host die
	GuardQuit   = 'q' // "q": the host is closing cleanly; its roots are its own business
)

// guardSweepBound is how long the guard keeps killing after the host died:
// a process may fork while its session is being killed, so the sweep runs
// until passes find no one left.
const guardSweepBound = 2 * time.Second

// guardEndedBound bounds the sweep of one batch of sessions the host gave
// up on, during which the guard reads no registrations.
const guardEndedBound = 2 * time.Second

// deadRootLimit is the entry-visit budget for removing one dead host's
// staging root: ten workspace teardowns' worth. The guard is off every
// host's path, but a planted tree of millions of entries must still not
// keep it alive for long; a remainder keeps its owner marker.
const deadRootLimit = 100000

// AppendGuardLine appends the line with op (GuardAdd, GuardForget or
// GuardSweep) for session sid.
func AppendGuardLine(b []byte, op byte, sid int) []byte {
	b = append(b, op)
	b = strconv.AppendInt(b, int64(sid), 10)
	return append(b, '\n')
}

// AppendGuardRoot appends the line naming a staging root. The path is
// quoted, so no byte of it can end the line.
func AppendGuardRoot(b []byte, root string) []byte {
	b = append(b, GuardRoot)
	b = strconv.AppendQuote(b, root)
	return append(b, '\n')
}

// AppendGuardQuit appends the line of a clean shutdown.
func AppendGuardQuit(b []byte) []byte { return append(b, GuardQuit, '\n') }

// ErrGuardLine names a line the guard does not understand.
var ErrGuardLine = errors.New("guard: malformed line")

// GuardLine is one parsed line.
type GuardLine struct {
	Op   byte
	SID  int    // GuardAdd, GuardForget, GuardSweep
	Root string // GuardRoot: an absolute, clean path
}

// ParseGuardLine reads one line (without its newline).
func ParseGuardLine(line []byte) (GuardLine, error) {
	bad := func() (GuardLine, error) { return GuardLine{}, fmt.Errorf("%w: %q", ErrGuardLine, line) }
	if len(line) == 0 {
		return bad()
	}
	switch op := line[0]; op {
	case GuardAdd, GuardForget, GuardSweep:
		if len(line) < 2 || line[1] < '0' || line[1] > '9' {
			return bad()
		}
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil || n <= 1 {
			// Init's session is never ours.
			return bad()
		}
		return GuardLine{Op: op, SID: n}, nil
	case GuardRoot:
		root, err := strconv.Unquote(string(line[1:]))
		if err != nil || !filepath.IsAbs(root) || filepath.Clean(root) != root {
			return bad()
		}
		return GuardLine{Op: op, Root: root}, nil
	case GuardQuit:
		if len(line) != 1 {
			return bad()
		}
		return GuardLine{Op: op}, nil
	}
	return bad()
}

// guardMain is the guard process; it never returns.
func guardMain() {
	// Hang-ups and interrupts are the host's business; the guard only
	// ends when the host's end of the pipe does.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	host := 0
	if len(os.Args) > 1 {
		host, _ = strconv.Atoi(os.Args[1])
	}
	sessions := map[int]struct{}{}
	var ended, ids []int
	var roots []string
	quit := false
	var partial []byte
	buf := make([]byte, 4096)
	for {
		n, err := os.Stdin.Read(buf)
		partial = append(partial, buf[:n]...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			l, perr := ParseGuardLine(partial[:i])
			partial = partial[i+1:]
			if perr != nil {
				continue
			}
			switch l.Op {
			case GuardAdd:
				// A reused id means the old session is empty: the kernel
				// keeps an id while any process has it as its session.
				sessions[l.SID] = struct{}{}
			case GuardForget:
				delete(sessions, l.SID)
			case GuardSweep:
				delete(sessions, l.SID)
				ended = append(ended, l.SID)
			case GuardRoot:
				if !slices.Contains(roots, l.Root) {
					roots = append(roots, l.Root)
				}
			case GuardQuit:
				quit = true
			}
		}
		// The host gave up on these within its own bound; they are
		// swept again here, off the host's path.
		if len(ended) > 0 {
			KillSessions(ended, false, guardEndedBound)
			ended = ended[:0]
		}
		if err != nil {
			break
		}
	}
	for id := range sessions {
		ids = append(ids, id)
	}
	KillSessions(ids, true, guardSweepBound)
	// Only a host that died leaves its roots to the guard: one that
	// closed cleanly removed what it had to, and what it kept (spills)
	// is meant to stay.
	if !quit && host > 1 {
		for _, root := range roots {
			_, _ = privfs.RemoveDeadRoot(root, host, deadRootLimit)
		}
	}
	os.Exit(0)
}
