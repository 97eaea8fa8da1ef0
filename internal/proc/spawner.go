package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proc/internal/sweep"
)

// ErrClosed is returned by Start once the Spawner is closed.
var ErrClosed = errors.New("spawner closed")

// Command describes one python3 child.
type Command struct {
	// Path is the interpreter, run as given (a virtualenv's python3 keeps
	// its environment). It should be absolute, as ResolvePython returns it:
	// a relative path is resolved in Dir.
	Path string
	// Args follow Path on the command line; python's argv[0] is Path.
	Args []string
	// Dir is the working directory; empty means the host's.
	Dir string
	// Env is python's environment; nil means os.Environ().
	Env []string
	// ExtraFiles become fds 3, 4, ... in python (a nil entry is a closed
	// fd). As with os/exec, Start puts them in blocking mode. The caller
	// keeps ownership and closes its copies after Start.
	ExtraFiles []*os.File
	Limits     Limits
	// Output receives python's stdout and stderr, which share one pipe so
	// their order is kept, unless Stderr is set. It may be nil. It should
	// not block for long: the pipe fills and python waits while it does.
	Output io.Writer
	// Stdin becomes python's fd 0 (typically the read end of a request
	// pipe); nil means /dev/null. As with ExtraFiles, the caller keeps
	// ownership and closes its copy after Start. A Command with Main takes
	// StdinSocket instead.
	Stdin *os.File
	// StdinSocket makes python's fd 0 one end of a socket pair the Spawner
	// makes with the interpreter; Process.Stdin is the host's end. A
	// socket, not a pipe: no other process can open it again through
	// /proc to read or forge what the host writes.
	StdinSocket bool
	// Stderr, when set, receives python's fd 2 through a pipe of its own,
	// so Output sees only fd 1. A session kernel's fd 1 carries protocol
	// frames that start-up noise on fd 2 must never be mixed into.
	Stderr io.Writer
	// Sandbox, when set, confines python before its program runs (see
	// Sandbox); Start then returns only once python reported the
	// confinement in force, and fails, with ErrSandbox, otherwise.
	Sandbox *Sandbox
	// Program, when set, is another program (an MCP server) that python3
	// becomes once Bootstrap has run: python3 -I -S runs Bootstrap and
	// then execs Program with Args, so the program starts as python does,
	// with its limits set, SIGINT at default and inherited descriptors
	// closed, none of which a host could otherwise do before exec.
	Program string
	// Main, when set, is the python file the interpreter runs as its
	// __main__, as `Path Flags... Main Args...` would: Args are then the
	// program's own arguments (sys.argv[1:]). Such an interpreter starts
	// generic, `Path Flags... -c Bootstrap`, and learns its run (Main,
	// Args, Dir, the descriptors, the environment's per-run part) over the
	// handshake, so one started ahead of its run (see KeepWarm) serves it
	// as one started for it does; the program sees the sys.argv,
	// sys.orig_argv, sys.path, __main__, working directory, environment
	// and descriptors a direct start gives (docs/architecture.md, Warm
	// interpreters).
	Main string
	// Flags are the interpreter's own options before Main ("-u").
	Flags []string
	// MainSource, when set, is what Main is expected to hold: the
	// interpreter compiles it while it waits for its run, and runs that
	// code when Main holds exactly these bytes (else it compiles Main).
	MainSource string
	// Module, when its Name is set, is a module file beside Main that the
	// program imports (a kernel's or a per-call run's helper module): the
	// interpreter compiles its Source ahead too, or takes the cache an
	// earlier interpreter of its binary and shape made (so a Spawner
	// compiles a module once), and at the run leaves a checked bytecode
	// cache of it in __pycache__ beside Main, which python's import uses
	// only while the file holds exactly Source.
	Module ModuleSource
	// Tag names whatever else shapes the program (the helper set): a
	// warm interpreter serves only commands of its own tag.
	Tag string
}

// ModuleSource is a module file's name and the source it holds.
type ModuleSource struct{ Name, Source string }

// programLauncher is what python3 runs after Bootstrap for a Program:
// argv[1] is the program, the rest its arguments.
const programLauncher = "import os, sys\nos.execv(sys.argv[1], sys.argv[1:])\n"

// Spawner starts every child from one OS thread that stays alive until
// Close. SysProcAttr.Pdeathsig fires when the *thread* that forked the
// child exits, and Go retires threads at will, so only a pinned thread
// makes "the host died" the one event that kills the children.
type Spawner struct {
	guard *guard
	pool  *pool
	// code holds the launcher as compiled code, by binary and
	// optimization level (launch.go, codeKeyOf), and the modules'
	// bytecode caches, by binary and shape (moduleKeyOf): each made by an
	// interpreter before its run.
	codeMu sync.Mutex
	code   map[string][]byte
	// launched counts the interpreters forked for a Main.
	launched atomic.Int64
	reqs     chan spawnRequest
	quit     chan struct{}
	stopped  chan struct{}
	once     sync.Once
}

type spawnRequest struct {
	path  string
	argv  []string
	attr  *syscall.ProcAttr
	reply chan spawnReply
}

type spawnReply struct {
	pid int
	err error
}

// NewSpawner starts the pinned spawning goroutine.
func NewSpawner() *Spawner {
	s := &Spawner{
		guard:   newGuard(),
		reqs:    make(chan spawnRequest),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	s.pool = newPool(s)
	go s.run(nil)
	return s
}

func (s *Spawner) run(handover chan<- struct{}) {
	runtime.LockOSThread()
	// Never unlocked: when run returns, the runtime terminates the thread.
	if unix.Gettid() == unix.Getpid() {
		// The main thread is never terminated, so children forked from it
		// would outlive Close. While this goroutine holds the main thread
		// the new one cannot be scheduled on it.
		ready := make(chan struct{})
		go s.run(ready)
		<-ready
		runtime.UnlockOSThread()
		return
	}
	if handover != nil {
		close(handover)
	}
	defer close(s.stopped)
	for {
		select {
		case <-s.quit:
			return
		case r := <-s.reqs:
			pid, err := syscall.ForkExec(r.path, r.argv, r.attr)
			r.reply <- spawnReply{pid: pid, err: err}
		}
	}
}

// Close ends the warm interpreters (those still starting too) and waits
// for their end, then ends the spawning goroutine and with it its thread,
// so any child still alive receives SIGKILL from the kernel. Callers stop
// their children first; Close is idempotent.
func (s *Spawner) Close() {
	s.once.Do(func() {
		s.pool.close()
		close(s.quit)
	})
	<-s.stopped
	s.guard.close()
}

// GuardRoot names a staging root the host created. Should the host die
// without closing the Spawner (SIGKILL, a crash), its guard removes what
// is left in the root once the host's processes are dead: everything but
// the full-output spills, whose paths were handed out and which stay for
// their 24 hours; the root goes with its marker once nothing else is
// left. Only a root whose owner marker names this process is touched.
// A clean Close leaves every root to its owner.
func (s *Spawner) GuardRoot(root string) error {
	if err := s.guard.addRoot(root); err != nil {
		return fmt.Errorf("guard root: %w", err)
	}
	return nil
}

// Start starts cmd's interpreter in a session of its own with the
// parent-death signal set, applies cmd.Limits to it while its Bootstrap
// waits, registers it with the guard and then lets it run. It returns
// once python runs; ctx bounds only the start: the child lives until it
// exits or is stopped with Kill or Interrupt. A failed step kills the
// child, which has run none of cmd's code, and is named in the error.
// A Program that cannot be executed makes python exit 1 with the reason
// on its stderr.
func (s *Spawner) Start(ctx context.Context, cmd Command) (*Process, error) {
	if cmd.Path == "" {
		return nil, errors.New("start python: empty interpreter path")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	select {
	case <-s.quit:
		return nil, ErrClosed
	default:
	}
	if cmd.Main != "" {
		return s.startMain(ctx, cmd)
	}
	if cmd.StdinSocket {
		return nil, fmt.Errorf("start %s: StdinSocket needs a Main", cmd.Path)
	}

	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	var release []byte
	if cmd.Sandbox != nil {
		prog, err := cmd.Sandbox.payload()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
		}
		env = cmd.Sandbox.env(env)
		release = append(fmt.Appendf(nil, "S%08x", len(prog)), prog...)
	}
	// The handshake is the descriptor after the extra files; everything
	// above it is closed by Bootstrap.
	hsFD := 3 + len(cmd.ExtraFiles)
	env = append(environ(env, cmd.Limits.MemoryMB > 0), handshakeValue(hsFD, os.Getpid()))

	cio, err := openChildIO(cmd.Stderr != nil)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	// The host never needs the child's ends: closed whatever happens.
	defer cio.closeChildEnds()
	argv := append([]string{cmd.Path}, cmd.Args...)
	if cmd.Program != "" {
		argv = append([]string{cmd.Path, "-I", "-S", "-c", Bootstrap + programLauncher, cmd.Program}, cmd.Args...)
	}
	req := spawnRequest{
		path: cmd.Path,
		argv: argv,
		attr: &syscall.ProcAttr{
			Dir:   cmd.Dir,
			Env:   env,
			Files: cio.files(cmd),
			Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
		},
		reply: make(chan spawnReply, 1),
	}

	// Subscribe to the exit before the child exists.
	p := newProcess(s.guard.remove)
	pidc := make(chan int, 1)
	go p.wait(pidc)

	fail := func(err error) (*Process, error) {
		close(pidc)
		cio.closeHostEnds()
		return nil, err
	}
	s.guard.prepare(cmd.Path)
	// Counted before the fork: the end-of-run sweep then knows how many
	// pids can have been handed out since python's (see KillSession).
	p.forks0, _ = sweep.ForkCount()
	select {
	case s.reqs <- req:
	case <-s.quit:
		return fail(ErrClosed)
	case <-ctx.Done():
		return fail(fmt.Errorf("start %s: %w", cmd.Path, ctx.Err()))
	}
	// A fork takes milliseconds; once the request is taken the child's
	// fate must be known, or it would have no owner.
	r := <-req.reply
	runtime.KeepAlive(cmd.ExtraFiles)
	runtime.KeepAlive(cmd.Stdin)
	if r.err != nil {
		return fail(fmt.Errorf("start %s: %w", cmd.Path, r.err))
	}
	p.pid = r.pid
	var stepErr error
	if stepErr = s.admit(r.pid, cmd.Limits, cio.release, release); stepErr == nil && cmd.Sandbox != nil {
		p.sandbox, stepErr = awaitConfined(ctx, cio.release)
	}
	if stepErr != nil {
		_ = unix.Kill(-r.pid, unix.SIGKILL)
	}
	p.drainTo(cio.out, cmd.Output)
	if cio.errOut != nil {
		p.drainTo(cio.errOut, cmd.Stderr)
	}
	pidc <- r.pid
	if stepErr != nil {
		<-p.done
		return nil, fmt.Errorf("start %s: %w", cmd.Path, stepErr)
	}
	return p, nil
}

// admit lets the child pid, waiting on its handshake, become python: its
// limits are in force before its first statement, and its unreaped pid
// cannot name anyone else meanwhile. It is registered with the guard
// before the waiter learns the pid, so the removal at the child's end
// always follows this; without a guard a host killed with SIGKILL would
// leave the child's children running, so a child is refused rather than
// run unguarded. sandbox, when not nil, is the release message that asks
// the bootstrap to confine itself first.
func (s *Spawner) admit(pid int, lim Limits, handshake *os.File, sandbox []byte) error {
	if err := applyLimits(pid, lim); err != nil {
		return err
	}
	if err := s.guard.add(pid); err != nil {
		return err
	}
	msg := sandbox
	if msg == nil {
		msg = []byte("1")
	}
	// The socket holds far more than a sandbox program, so the write does
	// not wait on python; the deadline only guards against the impossible.
	_ = handshake.SetWriteDeadline(time.Now().Add(handshakeWriteBound))
	if _, err := handshake.Write(msg); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	return nil
}

// handshakeWriteBound bounds the release write.
const handshakeWriteBound = 10 * time.Second

// awaitConfined waits, within ctx, for the bootstrap's sandbox status on
// the handshake and returns the protections it reports; anything but all
// of them is an error wrapping ErrSandbox.
func awaitConfined(ctx context.Context, handshake *os.File) (Protections, error) {
	stop := context.AfterFunc(ctx, func() { _ = handshake.SetReadDeadline(time.Now()) })
	defer stop()
	got, err := readSandboxStatus(bufio.NewReader(handshake))
	if err != nil {
		if ctx.Err() != nil {
			return Protections{}, fmt.Errorf("%w: no sandbox status in time: %w", ErrSandbox, ctx.Err())
		}
		return Protections{}, err
	}
	if want := Planned(got.ABI); got != want || got.ABI < MinLandlockABI {
		return Protections{}, fmt.Errorf("%w: the interpreter reported %+v in force, not %+v", ErrSandbox, got, want)
	}
	return got, nil
}

// childIO is what one start opens besides the command's own files: the
// child's stdin stand-in (/dev/null), the handshake pipe, the output pipe
// behind its fds 1 and 2, and a stderr pipe of its own when the command
// wants one. The child's ends are raw descriptors the host closes once
// the fork is over; the host's read ends are non-blocking, so their drain
// can be bounded with a read deadline.
type childIO struct {
	devnull, hsRead, outWrite, errWrite int
	release                             *os.File // the handshake's host end
	out, errOut                         *os.File
}

func openChildIO(ownStderr bool) (_ *childIO, err error) {
	c := &childIO{devnull: -1, hsRead: -1, outWrite: -1, errWrite: -1}
	defer func() {
		if err != nil {
			c.closeChildEnds()
			c.closeHostEnds()
		}
	}()
	if c.devnull, err = unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return c, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	// A socket, not a pipe: the bootstrap answers on it when it confines
	// itself, and no other process can open it again through /proc to
	// release the child early.
	hs, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return c, fmt.Errorf("handshake socket: %w", err)
	}
	c.hsRead = hs[0]
	if err = unix.SetNonblock(hs[1], true); err != nil {
		unix.Close(hs[1])
		return c, fmt.Errorf("handshake socket: %w", err)
	}
	c.release = os.NewFile(uintptr(hs[1]), "python-handshake")
	if c.out, c.outWrite, err = hostReadPipe("python-output"); err != nil {
		return c, fmt.Errorf("output pipe: %w", err)
	}
	if ownStderr {
		if c.errOut, c.errWrite, err = hostReadPipe("python-stderr"); err != nil {
			return c, fmt.Errorf("stderr pipe: %w", err)
		}
	}
	return c, nil
}

// hostReadPipe is a pipe whose read end is the host's, non-blocking, and
// whose write end stays blocking for python.
func hostReadPipe(name string) (*os.File, int, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, -1, err
	}
	return os.NewFile(uintptr(fds[0]), name), fds[1], nil
}

// files is the child's descriptor table: stdin, the output pipe as fd 1,
// stderr (the output pipe again unless it has its own), the extra files,
// then the handshake.
func (c *childIO) files(cmd Command) []uintptr {
	stdin, stderr := uintptr(c.devnull), uintptr(c.outWrite)
	if cmd.Stdin != nil {
		stdin = cmd.Stdin.Fd()
	}
	if c.errWrite >= 0 {
		stderr = uintptr(c.errWrite)
	}
	files := []uintptr{stdin, uintptr(c.outWrite), stderr}
	for _, f := range cmd.ExtraFiles {
		if f == nil {
			files = append(files, ^uintptr(0)) // closed in the child
			continue
		}
		files = append(files, f.Fd())
	}
	return append(files, uintptr(c.hsRead))
}

func (c *childIO) closeChildEnds() {
	for _, fd := range []*int{&c.devnull, &c.hsRead, &c.outWrite, &c.errWrite} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	if c.release != nil {
		c.release.Close()
		c.release = nil
	}
}

func (c *childIO) closeHostEnds() {
	for _, f := range []**os.File{&c.out, &c.errOut} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}
