package proc

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proc/internal/sweep"
)

// drainBound is how long output is still read once python's whole session
// is dead. Only a descendant that started a session of its own (setsid)
// can still hold the pipe then, and it must not hold up the result.
const drainBound = 500 * time.Millisecond

// SessionSweepBound bounds the kill of python's session when it ends. A
// sweep normally ends after one pass (nobody left; it probes just the
// pids handed out since python's fork) or three (some killed, then two
// quiet passes); only a fork storm without an nproc limit, or a member
// stuck in the kernel past its SIGKILL, can run it out (after at least
// four passes). Then the result is returned anyway and the guard sweeps
// again.
const SessionSweepBound = 2 * time.Second

// ExitStatus is how a child ended.
type ExitStatus struct {
	// Code is the exit status, or 128+signal for a signal death (the
	// shell's and containerd's convention), or -1 if the status was lost
	// (someone else reaped the child).
	Code     int
	Signaled bool
	Signal   syscall.Signal
	// StopRequested is true when Kill or Interrupt was called before the
	// child was reaped, so a SIGKILL was (or may have been) ours.
	StopRequested bool
}

// Process is one running python3, started directly by the Spawner. It
// leads its own session and process group, whose id is its pid.
type Process struct {
	pid     int
	forks0  uint64                    // ForkCount before the fork; 0 if unknown
	unguard func(pid int, swept bool) // the guard forgets the session: see wait
	done    chan struct{}
	exited  chan struct{}
	// sandbox is what the interpreter confined itself with (Command.Sandbox).
	sandbox Protections
	// stdin is the host's end of fd 0 (Command.StdinSocket).
	stdin *os.File

	mu            sync.Mutex
	reaped        bool
	stopRequested bool
	exit          ExitStatus
	// drains are the host's read ends of python's output pipes, each
	// copied to its writer; Done waits for them all.
	drains []drain
}

// drain is one output pipe being copied; done is closed at its end.
type drain struct {
	f    *os.File
	done chan struct{}
}

func newProcess(unguard func(pid int, swept bool)) *Process {
	return &Process{unguard: unguard, done: make(chan struct{}), exited: make(chan struct{})}
}

// drainTo copies the pipe f to w (nil discards) until every writer is
// gone, or the drain bound once python has ended; the Process owns f.
func (p *Process) drainTo(f *os.File, w io.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drainToLocked(f, w)
}

// drainToLocked is drainTo for a caller that holds p.mu and found the
// child unreaped, which the waiter needs in order to see the drain.
func (p *Process) drainToLocked(f *os.File, w io.Writer) {
	d := drain{f: f, done: make(chan struct{})}
	p.drains = append(p.drains, d)
	go copyOutput(f, w, d.done)
}

// Pid is python's pid, which is also its process group and session id.
func (p *Process) Pid() int { return p.pid }

// Sandbox is what the interpreter confined itself with before its program
// ran: the zero value for one started without a Command.Sandbox.
func (p *Process) Sandbox() Protections { return p.sandbox }

// Stdin is the host's end of the socket behind python's fd 0
// (Command.StdinSocket), non-blocking, or nil. The caller owns it.
func (p *Process) Stdin() *os.File { return p.stdin }

// whileUnreaped runs f while the child's pid is still its own (alive, or
// a zombie nobody reaped), so a step on the pid cannot reach a stranger;
// it fails with errGone once the child is reaped.
func (p *Process) whileUnreaped(f func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return errGone
	}
	return f()
}

// Done is closed once the child is reaped, its group killed and its output
// drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited is closed as soon as the child has exited (before its group is
// killed, its session swept and its output drained, which Done waits
// for): from then on nobody waits for its helper calls, so a bridge stops
// serving at Exited, and a descendant that escaped the sweep and holds
// the output open cannot have a call dispatched in the drain's bound.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Exit is the child's exit status; it is valid once Done is closed.
func (p *Process) Exit() ExitStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Kill sends SIGKILL to the whole process group now, even if python itself
// has already died (docs/architecture.md, Rules: no survivors). It is
// idempotent and does nothing once the child is reaped: by then the group
// was killed already, and its id may belong to someone else.
func (p *Process) Kill() { p.signalGroup(syscall.SIGKILL) }

// Signal sends sig to the whole process group, like Kill, and reports
// false when the child is already reaped (nothing was sent).
func (p *Process) Signal(sig syscall.Signal) bool { return p.signalGroup(sig) }

// Alive reports whether python has not been reaped yet. Its own wait
// status answers, not kill(pid, 0): a zombie would answer that.
func (p *Process) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.reaped
}

// signalGroup reports false when the child is already reaped.
func (p *Process) signalGroup(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopRequested = true
	if p.reaped {
		return false
	}
	// Until the leader is reaped its zombie keeps the group id taken, so
	// this reaches no stranger.
	_ = unix.Kill(-p.pid, sig)
	return true
}

// Interrupt escalates on the whole process group: SIGINT (python raises
// KeyboardInterrupt), then SIGTERM after grace, then SIGKILL after another
// grace. It returns as soon as the child is Done, or right after the
// SIGKILL; a cancelled ctx skips straight to SIGKILL.
func (p *Process) Interrupt(ctx context.Context, grace time.Duration) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if !p.signalGroup(sig) {
			return
		}
		t := time.NewTimer(grace)
		select {
		case <-p.done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			p.Kill()
			return
		case <-t.C:
		}
	}
	p.Kill()
}

// wait owns the child's end: it learns the pid from Start (it is running
// before the fork, so no exit can be missed), waits for the exit without
// reaping, kills the group and then the whole session while the zombie
// still pins their id, reaps, and bounds the output drain.
func (p *Process) wait(pidc <-chan int) {
	pid, ok := <-pidc
	if !ok {
		return // the start failed
	}
	var info unix.Siginfo
	err := ignoringEINTR(func() error {
		return unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	})
	close(p.exited)

	// Whatever python left behind in its group dies with it. Should the
	// wait have failed (SIGCHLD ignored by the host, so the zombie is
	// gone), the id stays taken while any member lives, so this is still
	// safe.
	_ = unix.Kill(-pid, unix.SIGKILL)
	swept := true
	if err == nil {
		// A descendant that moved to a group of its own (setpgid) is
		// still in python's session: every member is killed before
		// Done, so no run or kernel ends with one left. Only the zombie
		// pins the session id, so without it no sweep is safe. Outside
		// the lock: Kill and Alive must not wait for /proc passes.
		swept = sweep.KillSession(pid, p.forks0, SessionSweepBound).Complete
	}

	p.mu.Lock()
	// Before the reap, while the zombie still pins the id.
	p.unguard(pid, swept)
	st := ExitStatus{Code: -1}
	if err == nil {
		var ws unix.WaitStatus
		err = ignoringEINTR(func() error {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			return err
		})
		if err == nil {
			st = statusOf(ws)
		}
	}
	p.reaped = true
	st.StopRequested = p.stopRequested
	p.exit = st
	drains := p.drains
	p.mu.Unlock()

	deadline := time.Now().Add(drainBound)
	for _, d := range drains {
		_ = d.f.SetReadDeadline(deadline)
	}
	for _, d := range drains {
		<-d.done
		_ = d.f.Close()
	}
	close(p.done)
}

func statusOf(ws unix.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Code: 128 + int(ws.Signal()), Signaled: true, Signal: ws.Signal()}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// copyOutput drains a pipe until EOF (every writer gone) or the drain
// deadline, then closes done. A failing writer is dropped, but the pipe is
// still drained so python never blocks on it.
func copyOutput(from *os.File, w io.Writer, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && w != nil {
			if _, werr := w.Write(buf[:n]); werr != nil {
				w = nil
			}
		}
		if err != nil {
			return
		}
	}
}
