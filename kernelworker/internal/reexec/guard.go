package reexec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The guard is this binary re-executed with GuardEnv set, in a session of
// its own, with the read end of the host's pipe as its stdin (the host's
// side is kernelworker's guard.go). Lines on the pipe register ("+<sid>")
// and end ("-<sid>") the sessions of the host's children.
const (
	GuardEnv   = "EXECUTE_CODE_GUARD"
	GuardArgv0 = "execute-code-guard"
)

// guardSweepBound is how long the guard keeps killing after the host died:
// a process may fork while its session is being killed, so the sweep runs
// until a pass finds no one left.
const guardSweepBound = 2 * time.Second

// guardEndedBound bounds the sweep of one batch of ended sessions, during
// which the guard reads no registrations.
const guardEndedBound = 500 * time.Millisecond

// AppendGuardLine appends the line registering (op '+') or ending (op
// '-') session sid.
func AppendGuardLine(b []byte, op byte, sid int) []byte {
	b = append(b, op)
	b = strconv.AppendInt(b, int64(sid), 10)
	return append(b, '\n')
}

// ErrGuardLine names a line the guard does not understand.
var ErrGuardLine = errors.New("guard: malformed line")

// ParseGuardLine reads "+<sid>" (a session to guard) or "-<sid>" (one to
// forget).
func ParseGuardLine(line []byte) (add bool, sid int, err error) {
	if len(line) < 2 || (line[0] != '+' && line[0] != '-') {
		return false, 0, fmt.Errorf("%w: %q", ErrGuardLine, line)
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n <= 1 {
		return false, 0, fmt.Errorf("%w: %q", ErrGuardLine, line)
	}
	return line[0] == '+', n, nil
}

// guardMain is the guard process; it never returns.
func guardMain() {
	// Hang-ups and interrupts are the host's business; the guard only
	// ends when the host's end of the pipe does.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	sessions := map[int]struct{}{}
	ended := map[int]struct{}{}
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
			if add, sid, err := ParseGuardLine(partial[:i]); err == nil {
				if add {
					// A reused id means the old session is empty: the
					// kernel keeps an id while any process has it as its
					// session.
					sessions[sid] = struct{}{}
					delete(ended, sid)
				} else {
					delete(sessions, sid)
					ended[sid] = struct{}{}
				}
			}
			partial = partial[i+1:]
		}
		// The host killed the group of each ended child; a descendant that
		// moved to a group of its own is still in the session, and is
		// swept here, once per batch of ends, off the host's path.
		if len(ended) > 0 {
			killSessions(ended, false, guardEndedBound)
			clear(ended)
		}
		if err != nil {
			break
		}
	}
	killSessions(sessions, true, guardSweepBound)
	os.Exit(0)
}

// killSessions kills every live process whose session (or, with groups,
// whose process group) is one of ids, pass after pass, until a pass finds
// none or within has passed. A process that moved to a group of its own
// is still in its session; only one that started a session of its own
// escapes.
func killSessions(ids map[int]struct{}, groups bool, within time.Duration) {
	if len(ids) == 0 {
		return
	}
	if groups {
		for id := range ids {
			_ = unix.Kill(-id, unix.SIGKILL)
		}
	}
	deadline := time.Now().Add(within)
	self := os.Getpid()
	for {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, ent := range entries {
			pid, err := strconv.Atoi(ent.Name())
			if err != nil || pid == self {
				continue
			}
			st, ok := readProcStat(pid)
			if !ok || st.zombie {
				continue
			}
			_, inSession := ids[st.session]
			_, inGroup := ids[st.pgrp]
			if inSession || (groups && inGroup) {
				_ = unix.Kill(pid, unix.SIGKILL)
				found = true
			}
		}
		if !found || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type procStat struct {
	pgrp, session int
	zombie        bool
}

// readProcStat reads state, process group and session from
// /proc/<pid>/stat; the command name in parentheses may hold anything, so
// the fields are counted from its last ')'.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// state ppid pgrp session ...
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return procStat{}, false
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	session, err2 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{pgrp: pgrp, session: session, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}
