package proc

import (
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The parent-death signal reaches python but not python's children: the
// kernel clears it on fork. A host killed with SIGKILL would leave every
// grandchild running, and its staging root (scripts, the shim and its
// token) on disk. So each Spawner keeps one guard process beside it:
// python3 -I -S running guard.py (no host code, no site, no user
// environment) in its own session, which learns the session id of
// every live child and the host's staging roots over a pipe and, when the
// pipe reports end of file without a clean shutdown (the host is gone,
// however it died), kills every process still in one of those sessions and
// then removes what the host left in its roots, spills excepted. One guard
// per host costs one idle process and two small pipe writes per
// interpreter, instead of a resident supervisor per interpreter.

//go:embed guard.py
var guardSource string

// guardArgv0 is the guard's argv[0], so ps and a test's leftover check
// can tell it from the host's interpreters.
const guardArgv0 = "execute-code-guard"

// The operations of a guard line (guard.py reads them).
const (
	guardAdd    = '+' // "+<sid>": a child's session to kill should the host die
	guardForget = '-' // "-<sid>": the host swept that session itself
	guardSweep  = '!' // "!<sid>": the host's sweep ran out of time; sweep it there
	guardRoot   = 'r' // "r<hex path>": a staging root to clean should the host die
	guardQuit   = 'q' // "q": the host is closing cleanly
)

func appendGuardLine(b []byte, op byte, sid int) []byte {
	b = append(b, op)
	b = strconv.AppendInt(b, int64(sid), 10)
	return append(b, '\n')
}

// appendGuardRoot hex-encodes the path, so no byte of it can end the line
// and the guard decodes it without a quoting grammar.
func appendGuardRoot(b []byte, root string) []byte {
	b = append(b, guardRoot)
	b = hex.AppendEncode(b, []byte(root))
	return append(b, '\n')
}

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
	roots  []string
	closed bool
	// first is closed once the first start was tried, or once close found
	// that none ever was.
	first     chan struct{}
	firstOnce sync.Once
	// env is the host's environment when the Spawner was made: a guard
	// started later, with the first child or as a replacement, gets the
	// same.
	env []string
	// python is the interpreter of the first child, which runs every
	// guard of this Spawner.
	python string
}

// newGuard prepares the host's side; the guard process itself starts with
// the first child (prepare), so a runtime that never runs python never has
// one.
func newGuard() *guard {
	return &guard{
		live:  map[int]struct{}{},
		first: make(chan struct{}),
		env:   append(os.Environ(), guardEnv+"=1"),
	}
}

// prepare starts the first guard in the background, once, with python:
// its fork and exec overlap the child's own, and the child's add waits
// for it (the start holds the lock).
func (g *guard) prepare(python string) {
	g.firstOnce.Do(func() {
		g.mu.Lock()
		g.python = python
		go func() {
			defer close(g.first)
			defer g.mu.Unlock()
			// A failure here is retried by the add, which reports it.
			_ = g.startLocked()
		}()
	})
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
	// argv[1] is the host's pid: the guard removes only roots whose owner
	// marker names it.
	argv := []string{guardArgv0, "-I", "-S", "-c", guardSource, strconv.Itoa(os.Getpid())}
	proc, err := os.StartProcess(g.python, argv, &os.ProcAttr{
		Env:   g.env,
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
		msg = appendGuardLine(msg, guardAdd, id)
	}
	for _, root := range g.roots {
		msg = appendGuardRoot(msg, root)
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
	return g.sendLocked(appendGuardLine(nil, guardAdd, sid), true)
}

// remove is called once the child's session was swept and before the
// child is reaped: until then its zombie keeps the id from being reused,
// so the guard never holds an id that names a stranger. swept is false
// when the sweep ran out of time with members left: the guard then sweeps
// once more, off the host's path.
func (g *guard) remove(sid int, swept bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, sid)
	if g.closed {
		return
	}
	op := byte(guardForget)
	if !swept {
		op = guardSweep
	}
	// A new guard is told only the live sessions anyway.
	_ = g.sendLocked(appendGuardLine(nil, op, sid), false)
}

// addRoot tells the guard about a staging root. It does not start a
// guard: a host that dies before its first child leaves a root holding
// only its marker, which the next start's stale-root sweep removes.
func (g *guard) addRoot(root string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Contains(g.roots, root) {
		return nil
	}
	g.roots = append(g.roots, root)
	if g.closed || g.w == nil {
		return nil // the guard's start tells it
	}
	return g.sendLocked(appendGuardRoot(nil, root), true)
}

// sendLocked writes line to the guard; when that fails, the guard is
// replaced if restart is set (the new one is told every live session and
// root, so the line itself needs no resending).
func (g *guard) sendLocked(line []byte, restart bool) error {
	if g.w != nil {
		// A guard that stopped reading must not stall every spawn.
		_ = g.w.SetWriteDeadline(time.Now().Add(guardWriteBound))
		if _, err := g.w.Write(line); err == nil {
			return nil
		}
		g.dropGuardLocked()
	}
	if !restart {
		return nil
	}
	return g.startLocked()
}

// close ends the guard: told the shutdown is clean, it leaves the roots
// to the host, and with its pipe closed it kills whatever sessions are
// still registered (none, when every child was stopped first) and exits.
func (g *guard) close() {
	g.firstOnce.Do(func() { close(g.first) }) // no guard was ever started
	<-g.first
	g.mu.Lock()
	g.closed = true
	if g.w != nil {
		_ = g.w.SetWriteDeadline(time.Now().Add(guardWriteBound))
		_, _ = g.w.Write([]byte{guardQuit, '\n'})
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
