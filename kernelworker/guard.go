package kernelworker

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/executecode/executecode/kernelworker/internal/reexec"
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
	// first is closed once the first start was tried, or once close found
	// that none ever was.
	first     chan struct{}
	firstOnce sync.Once
	// env is the host's environment when the Spawner was made: a guard
	// started later, with the first child or as a replacement, gets the
	// same.
	env []string
}

// newGuard prepares the host's side; the guard process itself starts with
// the first child (prepare), so a runtime that never runs python never has
// one.
func newGuard() *guard {
	return &guard{
		live:  map[int]struct{}{},
		first: make(chan struct{}),
		env:   append(os.Environ(), reexec.GuardEnv+"=1"),
	}
}

// prepare starts the first guard in the background, once: its fork and
// exec overlap the child's own, and the child's add waits for it (the
// start holds the lock).
func (g *guard) prepare() {
	g.firstOnce.Do(func() {
		g.mu.Lock()
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
	proc, err := os.StartProcess(selfExe, []string{reexec.GuardArgv0}, &os.ProcAttr{
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
		msg = reexec.AppendGuardLine(msg, '+', id)
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
		if _, err := g.w.Write(reexec.AppendGuardLine(nil, op, sid)); err == nil {
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
	g.firstOnce.Do(func() { close(g.first) }) // no guard was ever started
	<-g.first
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
