package kernelworker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The parent-death signal reaches python but not python's children: the
// kernel clears it on fork (launcher-notes §5). A host killed with SIGKILL
// would leave every grandchild running. So each Spawner keeps one guard
// process beside it: this binary re-executed in its own session, which
// learns the session id of every live child over a pipe and, when the pipe
// reports end of file (the host is gone, however it died), kills every
// process still in one of those sessions. One guard per host costs one
// idle process and two small pipe writes per interpreter, instead of a
// resident supervisor per interpreter.
const (
	guardEnv   = "EXECUTE_CODE_GUARD"
	guardArgv0 = "execute-code-guard"
)

// guardSweepBound is how long the guard keeps killing after the host died:
// a process may fork while its session is being killed, so the sweep runs
// until a pass finds no one left.
const guardSweepBound = 2 * time.Second

// guardEndedBound bounds the sweep of one batch of ended sessions, during
// which the guard reads no registrations.
const guardEndedBound = 500 * time.Millisecond

// guardWriteBound is how long a registration may wait for a guard that
// does not read; after it the guard is replaced.
const guardWriteBound = time.Second

// guardStopBound is how long Close waits for the guard to exit after its
// pipe was closed, before it kills it.
const guardStopBound = 5 * time.Second

// guard is the host's side: the write end of the guard's pipe and the set
// of sessions it was told about, so that a guard that died (someone killed
// it) is replaced by one that knows every live session.
type guard struct {
	mu     sync.Mutex
	w      *os.File // nil while no guard runs
	proc   *os.Process
	exited chan struct{} // closed once the current guard is reaped
	live   map[int]struct{}
	closed bool
}

func newGuard() *guard {
	g := &guard{live: map[int]struct{}{}}
	g.mu.Lock()
	defer g.mu.Unlock()
	// A failure here is retried by the first add, which reports it.
	_ = g.startLocked()
	return g
}

// startLocked starts a guard and tells it every live session.
func (g *guard) startLocked() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("guard pipe: %w", err)
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return fmt.Errorf("guard: open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	// Its own session: a terminal's Ctrl-C or a kill of the host's group
	// must not take the guard before it has done its work. os.Process
	// holds a pidfd, so killing a replaced guard can never hit a stranger.
	proc, err := os.StartProcess(selfExe, []string{guardArgv0}, &os.ProcAttr{
		Env:   append(os.Environ(), guardEnv+"=1"),
		Files: []*os.File{r, devnull, devnull},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		w.Close()
		return fmt.Errorf("start guard: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_, _ = proc.Wait()
	}()
	g.w, g.proc, g.exited = w, proc, exited
	var msg []byte
	for id := range g.live {
		msg = appendGuardLine(msg, '+', id)
	}
	if len(msg) > 0 {
		if _, err := w.Write(msg); err != nil {
			g.dropGuardLocked()
			return fmt.Errorf("guard: %w", err)
		}
	}
	return nil
}

// dropGuardLocked kills a guard that can no longer be told anything (it
// died, or stopped reading): left alive, it would kill the host's live
// sessions once its pipe closed.
func (g *guard) dropGuardLocked() {
	if g.w != nil {
		_ = g.proc.Kill()
		g.w.Close()
		g.w = nil
	}
}

// add tells the guard about a new child, which leads its own session.
func (g *guard) add(sid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live[sid] = struct{}{}
	if g.closed {
		return nil
	}
	return g.sendLocked('+', sid)
}

// remove is called once the child's group is dead and before the child is
// reaped: until then its zombie keeps the id from being reused, so the
// guard never holds an id that names a stranger.
func (g *guard) remove(sid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, sid)
	if !g.closed {
		_ = g.sendLocked('-', sid)
	}
}

func (g *guard) sendLocked(op byte, sid int) error {
	if g.w != nil {
		// A guard that stopped reading must not stall every spawn.
		_ = g.w.SetWriteDeadline(time.Now().Add(guardWriteBound))
		if _, err := g.w.Write(appendGuardLine(nil, op, sid)); err == nil {
			return nil
		}
		g.dropGuardLocked()
	}
	if op == '-' {
		return nil // a new guard is told only the live sessions anyway
	}
	return g.startLocked()
}

// close ends the guard: with its pipe closed it kills whatever sessions
// are still registered (none, when every child was stopped first) and
// exits.
func (g *guard) close() {
	g.mu.Lock()
	g.closed = true
	if g.w != nil {
		g.w.Close()
		g.w = nil
	}
	exited, proc := g.exited, g.proc
	g.mu.Unlock()
	if exited == nil {
		return
	}
	t := time.NewTimer(guardStopBound)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = proc.Kill()
		<-exited
	}
}

func appendGuardLine(b []byte, op byte, sid int) []byte {
	b = append(b, op)
	b = strconv.AppendInt(b, int64(sid), 10)
	return append(b, '\n')
}

// errGuardLine names a line the guard does not understand.
var errGuardLine = errors.New("guard: malformed line")

// parseGuardLine reads "+<sid>" (a session to guard) or "-<sid>" (one to
// forget).
func parseGuardLine(line []byte) (add bool, sid int, err error) {
	if len(line) < 2 || (line[0] != '+' && line[0] != '-') {
		return false, 0, fmt.Errorf("%w: %q", errGuardLine, line)
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n <= 1 {
		return false, 0, fmt.Errorf("%w: %q", errGuardLine, line)
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
			if add, sid, err := parseGuardLine(partial[:i]); err == nil {
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
