package proc

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/proc/internal/sweep"
)

// A Command with Main is started in two steps, so that the first can
// happen before its run exists (KeepWarm): an interpreter is forked with
// what is the same for every run of its shape (interpreter, flags, the
// start-up environment, the pipes behind fds 1 and 2, the socket behind
// fd 0) and gets the launcher and the source it may compile ahead; then a
// run takes it, sets its limits with prlimit(2) and sends what is the
// run's own (Main, argv, the working directory, the environment's per-run
// part, the extra files as SCM_RIGHTS, the sandbox). A run that finds no
// warm interpreter of its shape forks one and takes it at once: a cold
// start is the same two steps back to back, so a warm and a cold start
// run the program alike.

//go:embed launcher.py
var launcherSource string

// warmArg ends the command line of an interpreter no run has taken yet
// (its sys.argv[1] until then), so ps, and a test's leftover check, can
// tell it from a run's: a taken one's command line is its run's.
const warmArg = "execute-code-warm"

// errGone: the interpreter died before it took its run, so the run never
// started on it.
var errGone = errors.New("interpreter gone before its run")

// maxWarmTries bounds how many warm interpreters a start tries that turn
// out dead before it starts one of its own.
const maxWarmTries = 3

// earlyBound is how much of what an interpreter writes before its run
// (start-up noise of a site hook) is kept, for a run whose interpreter
// died before it.
const earlyBound = 64 << 10

// shape is what an interpreter for a Main is started with before it knows
// its run; two commands of one key are served by the same interpreters.
type shape struct {
	path      string
	flags     []string
	env       []string // the start-up environment, handshake excepted
	dir       string   // the start-up working directory
	stdin     bool     // fd 0 is a socket (StdinSocket), else /dev/null
	ownStderr bool
	prepared  string
	module    ModuleSource
	key       string
}

// shapeOf is cmd's shape. The start-up directory shapes the interpreter
// only through a relative PYTHONPATH entry (site makes sys.path absolute
// against it), so only then is it part of the key.
func shapeOf(cmd Command) shape {
	base := cmd.Env
	if base == nil {
		base = os.Environ()
	}
	start := base
	if cmd.Sandbox != nil {
		start = cmd.Sandbox.startEnv(base)
	}
	start = environ(start, cmd.Limits.MemoryMB > 0)
	sh := shape{path: cmd.Path, flags: slices.Clone(cmd.Flags), env: start, dir: cmd.Dir,
		stdin: cmd.StdinSocket, ownStderr: cmd.Stderr != nil, prepared: cmd.MainSource, module: cmd.Module}
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	list := func(l []string) {
		field(fmt.Sprint(len(l)))
		for _, s := range l {
			field(s)
		}
	}
	field(cmd.Path)
	list(cmd.Flags)
	list(start)
	field(fmt.Sprint(sh.stdin, sh.ownStderr, cmd.Sandbox != nil))
	field(cmd.MainSource)
	field(cmd.Module.Name)
	field(cmd.Module.Source)
	field(cmd.Tag)
	if relativePythonPath(start) {
		field(cmd.Dir)
	}
	sh.key = string(h.Sum(nil))
	return sh
}

func relativePythonPath(env []string) bool {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			for _, p := range filepath.SplitList(v) {
				if !filepath.IsAbs(p) {
					return true
				}
			}
		}
	}
	return false
}

// pyEnviron is env as python's os.environ holds it: entries without "="
// are left out and the first of a repeated name wins.
func pyEnviron(env []string) ([]string, map[string]string) {
	var keys []string
	vals := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if _, dup := vals[k]; dup {
			continue
		}
		keys = append(keys, k)
		vals[k] = v
	}
	return keys, vals
}

// runSpec is the "R" message: what is the run's own, as NUL-separated
// fields (no field of an argv, an environment or a path can hold a NUL).
func runSpec(cmd Command, sh shape) ([]byte, error) {
	runEnv := cmd.Env
	if runEnv == nil {
		runEnv = os.Environ()
	}
	if cmd.Sandbox != nil {
		runEnv = cmd.Sandbox.env(runEnv)
	}
	runEnv = environ(runEnv, cmd.Limits.MemoryMB > 0)
	startKeys, startVals := pyEnviron(sh.env)
	runKeys, runVals := pyEnviron(runEnv)
	var unset, set []string
	for _, k := range startKeys {
		if _, ok := runVals[k]; !ok {
			unset = append(unset, k)
		}
	}
	for _, k := range runKeys {
		if v, ok := startVals[k]; !ok || v != runVals[k] {
			set = append(set, k, runVals[k])
		}
	}
	cwd := cmd.Dir
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		cwd = wd
	}
	argv := append([]string{cmd.Main}, cmd.Args...)
	orig := append(append(append([]string{cmd.Path}, cmd.Flags...), cmd.Main), cmd.Args...)
	// The descriptors come as SCM_RIGHTS in this order: the run's output
	// pipe as fds 1 and 2 (or its stderr pipe as 2), then the extra
	// files that are not nil; a nil one is a closed descriptor, and the
	// handshake follows the extra files.
	targets, closed := []string{"1", "2"}, []string{}
	for i, f := range cmd.ExtraFiles {
		if f != nil {
			targets = append(targets, fmt.Sprint(3+i))
		} else {
			closed = append(closed, fmt.Sprint(3+i))
		}
	}
	fields := []string{cmd.Main, cwd}
	for _, l := range [][]string{argv, orig, unset, set} {
		fields = append(fields, fmt.Sprint(len(l)))
		fields = append(fields, l...)
	}
	fields = append(fields, strings.Join(orig, " "), strings.Join(targets, ","), strings.Join(closed, ","), fmt.Sprint(3+len(cmd.ExtraFiles)))
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("%w: a NUL byte in an argument, the environment or a path", syscall.EINVAL)
		}
	}
	return []byte(strings.Join(fields, "\x00")), nil
}

// message frames a payload as the bootstrap reads it: a type byte, the
// length in 8 hex digits, the bytes.
func message(typ byte, payload ...[]byte) []byte {
	b := []byte{typ}
	for _, p := range payload {
		b = fmt.Appendf(b, "%08x", len(p))
		b = append(b, p...)
	}
	return b
}

// interp is one interpreter forked for a Main: registered with the guard,
// given the launcher, not yet given a run.
type interp struct {
	sh    shape
	p     *Process
	hs    *os.File // the handshake's host end
	stdin *os.File // the host's end of fd 0 (StdinSocket), else nil
	// early is what it wrote before its run, into the pipes it started
	// with: dropped, unless it died before its run (then that explains
	// why).
	early   *TailBuffer
	started time.Time
	// codeKey names the compiled launcher's cache entry: "" when the
	// binary could not be identified (then it gets the source).
	// moduleKey names the entry of its module's bytecode cache: "" when
	// there is no module, or no codeKey.
	codeKey, moduleKey string
	// ready is closed once the launcher waits for its run, or once it
	// cannot (readyErr).
	ready    chan struct{}
	readyErr error
}

// isReady says whether the interpreter waits for its run now.
func (it *interp) isReady() bool {
	select {
	case <-it.ready:
		return it.readyErr == nil
	default:
		return false
	}
}

// fork starts an interpreter of sh, with pipes behind fds 1 and 2 that
// only its start-up writes to (see interp.early): its run brings its own.
func (s *Spawner) fork(ctx context.Context, sh shape) (*interp, error) {
	cio, err := openChildIO(sh.ownStderr)
	if err != nil {
		return nil, err
	}
	// The host never needs the child's ends: closed whatever happens.
	defer cio.closeChildEnds()
	it := &interp{sh: sh, hs: cio.release, ready: make(chan struct{}), early: NewTailBuffer(earlyBound),
		codeKey: codeKeyOf(sh)}
	it.moduleKey = moduleKeyOf(it.codeKey, sh)
	cio.release = nil // the interpreter's now, until its run is sent
	closeHost := func() {
		it.hs.Close()
		if it.stdin != nil {
			it.stdin.Close()
		}
	}
	stdin := cio.devnull
	if sh.stdin {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			closeHost()
			cio.closeHostEnds()
			return nil, fmt.Errorf("stdin socket: %w", err)
		}
		stdin = fds[0]
		defer unix.Close(fds[0])
		if err := unix.SetNonblock(fds[1], true); err != nil {
			unix.Close(fds[1])
			closeHost()
			cio.closeHostEnds()
			return nil, fmt.Errorf("stdin socket: %w", err)
		}
		it.stdin = os.NewFile(uintptr(fds[1]), "python-stdin")
	}
	stderr := cio.outWrite
	if cio.errWrite >= 0 {
		stderr = cio.errWrite
	}
	argv := append(append([]string{sh.path}, sh.flags...), "-c", Bootstrap, warmArg)
	req := spawnRequest{
		path: sh.path,
		argv: argv,
		attr: &syscall.ProcAttr{
			Dir:   sh.dir,
			Env:   append(slices.Clone(sh.env), handshakeValue(3, os.Getpid())),
			Files: []uintptr{uintptr(stdin), uintptr(cio.outWrite), uintptr(stderr), uintptr(cio.hsRead)},
			Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
		},
		reply: make(chan spawnReply, 1),
	}
	p := newProcess(s.guard.remove)
	it.p = p
	pidc := make(chan int, 1)
	go p.wait(pidc)
	fail := func(err error) (*interp, error) {
		close(pidc)
		closeHost()
		cio.closeHostEnds()
		return nil, err
	}
	s.guard.prepare(sh.path)
	p.forks0, _ = sweep.ForkCount()
	select {
	case s.reqs <- req:
	case <-s.quit:
		return fail(ErrClosed)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	r := <-req.reply
	if r.err != nil {
		return fail(r.err)
	}
	p.pid = r.pid
	it.started = time.Now()
	s.launched.Add(1)
	// Registered before the waiter learns the pid, so the removal at the
	// child's end always follows this; an unguarded child is refused.
	gerr := s.guard.add(r.pid)
	if gerr != nil {
		_ = unix.Kill(-r.pid, unix.SIGKILL)
	}
	p.drainTo(cio.out, it.early)
	if cio.errOut != nil {
		p.drainTo(cio.errOut, it.early)
	}
	pidc <- r.pid
	if gerr == nil {
		_ = it.hs.SetWriteDeadline(time.Now().Add(handshakeWriteBound))
		// The launcher as code compiled by an earlier interpreter of this
		// binary and shape, else as source (this one then hands its code
		// back: see awaitReady).
		typ, launcher := byte('L'), []byte(launcherSource)
		if code, ok := s.compiled(it.codeKey); ok {
			typ, launcher = 'C', code
		}
		// The module's bytecode cache an earlier interpreter of this
		// binary and shape made, if the Spawner has it: this one checks
		// it against the source and compiles only if it does not fit.
		pyc, _ := s.compiled(it.moduleKey)
		_, gerr = it.hs.Write(message(typ, launcher, []byte(sh.prepared),
			[]byte(sh.module.Name), []byte(sh.module.Source), pyc))
		if gerr != nil {
			gerr = fmt.Errorf("handshake: %w", gerr)
		}
	}
	if gerr != nil {
		p.Kill()
		<-p.done
		closeHost()
		return nil, gerr
	}
	go it.awaitReady(s)
	return it, nil
}

// awaitReady reads the launcher's "w": it compiled what it was given and
// waits for its run. An interpreter given the launcher's source first
// hands back its code ("m", the length in 8 hex digits, marshal's bytes),
// one that compiled its module hands back the module's bytecode cache
// ("p", likewise); s keeps both for the next interpreter of its binary
// (and, for the module, its shape).
func (it *interp) awaitReady(s *Spawner) {
	defer close(it.ready)
	var b [2]byte
	for {
		if _, err := io.ReadFull(it.hs, b[:1]); err != nil {
			it.readyErr = fmt.Errorf("%w: %w", errGone, err)
			return
		}
		switch b[0] {
		case 'm':
			code, err := readLauncherCode(it.hs)
			if err != nil {
				it.readyErr = fmt.Errorf("%w: %w", errGone, err)
				return
			}
			s.keepCompiled(it.codeKey, code)
			continue
		case 'p':
			pyc, err := readModuleCache(it.hs)
			if err != nil {
				it.readyErr = fmt.Errorf("%w: %w", errGone, err)
				return
			}
			if pyc != nil {
				s.keepCompiled(it.moduleKey, pyc)
			}
			continue
		}
		break
	}
	if _, err := io.ReadFull(it.hs, b[1:]); err != nil {
		it.readyErr = fmt.Errorf("%w: %w", errGone, err)
		return
	}
	if string(b[:]) != "w\n" {
		it.readyErr = fmt.Errorf("%w: launcher said %q", errGone, b[:])
	}
}

// maxLauncherCode bounds the compiled launcher an interpreter hands back:
// marshal's bytes of the launcher are a few times its source.
const maxLauncherCode = 1 << 20

func readLauncherCode(r io.Reader) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size, err := strconv.ParseUint(string(n[:]), 16, 32)
	if err != nil || size == 0 || size > maxLauncherCode {
		return nil, fmt.Errorf("launcher code of %q bytes", n[:])
	}
	code := make([]byte, size)
	if _, err := io.ReadFull(r, code); err != nil {
		return nil, err
	}
	return code, nil
}

// maxModuleCache bounds a module's bytecode cache the host keeps: the
// helper module's is some 50 KiB, several hundred host tools' stubs
// would not reach this.
const maxModuleCache = 8 << 20

// readModuleCache reads a module's bytecode cache; one larger than
// maxModuleCache is read past and not kept (nil), since the interpreter
// still has it for its run.
func readModuleCache(r io.Reader) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size, err := strconv.ParseUint(string(n[:]), 16, 32)
	if err != nil {
		return nil, fmt.Errorf("module cache of %q bytes", n[:])
	}
	if size > maxModuleCache {
		_, err := io.CopyN(io.Discard, r, int64(size))
		return nil, err
	}
	pyc := make([]byte, size)
	if _, err := io.ReadFull(r, pyc); err != nil {
		return nil, err
	}
	return pyc, nil
}

// moduleKeyOf names the cache entry of sh's module as compiled by an
// interpreter of codeKey: a cache is handed only to interpreters of the
// same binary and optimization level and of the same shape (interpreter,
// start-up environment, confinement, module source), so an interpreter
// to be confined never gets bytes made by one that starts otherwise.
func moduleKeyOf(codeKey string, sh shape) string {
	if codeKey == "" || sh.module.Name == "" {
		return ""
	}
	return "module\x00" + codeKey + "\x00" + sh.key
}

// codeKeyOf names what python's compiled code depends on: the binary its
// interpreter runs (an upgrade in place changes its identity) and the
// optimization level (-O flags, PYTHONOPTIMIZE), so code is only ever
// given to an interpreter that would have compiled the same.
func codeKeyOf(sh shape) string {
	real, err := filepath.EvalSymlinks(sh.path)
	if err != nil {
		return ""
	}
	var st syscall.Stat_t
	if err := syscall.Stat(real, &st); err != nil {
		return ""
	}
	optimize := ""
	for _, kv := range sh.env {
		if v, ok := strings.CutPrefix(kv, "PYTHONOPTIMIZE="); ok {
			optimize = v
			break
		}
	}
	return fmt.Sprintf("%s\x00%q\x00%q\x00%d:%d:%d:%d:%d", real, sh.flags, optimize, st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
}

// maxCompiled bounds the cache: one launcher per binary and
// optimization level the runtime starts, and one module cache per shape
// with a module (a runtime's kernels and per-call runs).
const maxCompiled = 16

// compiled is what an earlier interpreter made for key (codeKey, or
// moduleKey), if the Spawner kept it.
func (s *Spawner) compiled(key string) ([]byte, bool) {
	if key == "" {
		return nil, false
	}
	s.codeMu.Lock()
	defer s.codeMu.Unlock()
	code, ok := s.code[key]
	return code, ok
}

// keepCompiled keeps what an interpreter made, before its run, for key.
func (s *Spawner) keepCompiled(key string, code []byte) {
	if key == "" {
		return
	}
	s.codeMu.Lock()
	defer s.codeMu.Unlock()
	if s.code == nil || len(s.code) >= maxCompiled {
		s.code = map[string][]byte{}
	}
	s.code[key] = code
}

// discard ends an interpreter that will never run anything and waits for
// its end.
func (it *interp) discard() {
	it.p.Kill()
	<-it.p.done
	it.hs.Close()
	if it.stdin != nil {
		it.stdin.Close()
	}
}

// startMain starts cmd on a warm interpreter of its shape when the pool
// has one, else on one forked for it.
func (s *Spawner) startMain(ctx context.Context, cmd Command) (*Process, error) {
	if cmd.Stdin != nil {
		return nil, fmt.Errorf("start %s: a Main takes StdinSocket, not Stdin", cmd.Path)
	}
	sh := shapeOf(cmd)
	spec, err := runSpec(cmd, sh)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	release := []byte("1")
	if cmd.Sandbox != nil {
		prog, err := cmd.Sandbox.payload()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
		}
		release = message('S', prog)
	}
	for tries := 0; ; tries++ {
		var it *interp
		if tries < maxWarmTries {
			it = s.pool.take(ctx, sh.key)
		}
		if it == nil {
			if it, err = s.fork(ctx, sh); err != nil {
				if errors.Is(err, ErrClosed) {
					return nil, err
				}
				return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
			}
			p, err := s.launch(ctx, it, cmd, spec, release)
			if errors.Is(err, errGone) && cmd.Sandbox == nil {
				// Died in its own start-up (a broken site hook): the run
				// sees that exit and what it wrote, as with a direct
				// start.
				p = it.p
				select {
				case <-p.done:
				case <-time.After(goneBound):
					it.discard()
					return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
				}
				it.hs.Close()
				if early := it.early.String(); early != "" && cmd.Output != nil {
					_, _ = io.WriteString(cmd.Output, early)
				}
				p.stdin = it.stdin
				return p, nil
			}
			if err != nil {
				it.discard()
				return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
			}
			return p, nil
		}
		p, err := s.launch(ctx, it, cmd, spec, release)
		if errors.Is(err, errGone) {
			it.discard()
			continue
		}
		if err != nil {
			it.discard()
			return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
		}
		return p, nil
	}
}

// launch gives it its run: the limits, then the run's message, its extra
// files and the release, then the launcher's status. An error wrapping
// errGone means the interpreter died before it took the run.
func (s *Spawner) launch(ctx context.Context, it *interp, cmd Command, spec, release []byte) (*Process, error) {
	p := it.p
	// The run's own output pipes, made now: nothing written before the
	// run (by anyone who opened the start-up pipes through /proc) can
	// reach its output. Their drains join the Process while its pid is
	// still its own, with the limits.
	var out, errOut *os.File
	var outW, errW int = -1, -1
	defer func() {
		for _, fd := range []int{outW, errW} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	err := p.whileUnreaped(func() error {
		if err := applyLimits(p.pid, cmd.Limits); err != nil {
			return err
		}
		var err error
		if out, outW, err = hostReadPipe("python-output"); err != nil {
			return fmt.Errorf("output pipe: %w", err)
		}
		p.drainToLocked(out, cmd.Output)
		if it.sh.ownStderr {
			if errOut, errW, err = hostReadPipe("python-stderr"); err != nil {
				return fmt.Errorf("stderr pipe: %w", err)
			}
			p.drainToLocked(errOut, cmd.Stderr)
		}
		return nil
	})
	if err != nil && !p.Alive() {
		err = fmt.Errorf("%w: %w", errGone, err)
	}
	if err != nil {
		return nil, err
	}
	// An interpreter still in its start-up reads nothing yet, so the run
	// may wait in the socket's buffer: the writes are bounded by the
	// start's ctx (at least handshakeWriteBound), not by python's pace.
	deadline := time.Now().Add(handshakeWriteBound)
	if d, ok := ctx.Deadline(); ok && d.After(deadline) {
		deadline = d
	}
	_ = it.hs.SetWriteDeadline(deadline)
	defer context.AfterFunc(ctx, func() { _ = it.hs.SetWriteDeadline(time.Now()) })()
	if _, err := it.hs.Write(message('R', spec)); err != nil {
		return nil, handshakeError(err)
	}
	fds := []int{outW, outW}
	if errW >= 0 {
		fds[1] = errW
	}
	for _, f := range cmd.ExtraFiles {
		if f != nil {
			fds = append(fds, int(f.Fd()))
		}
	}
	err = sendRights(it.hs, fds)
	runtime.KeepAlive(cmd.ExtraFiles)
	if err != nil {
		return nil, handshakeError(err)
	}
	if _, err := it.hs.Write(release); err != nil {
		return nil, handshakeError(err)
	}
	// The run waits in the socket for an interpreter still starting up;
	// its status follows the "w" that awaitReady reads.
	select {
	case <-it.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if it.readyErr != nil {
		return nil, it.readyErr
	}
	got, err := awaitStatus(ctx, it.hs, cmd.Sandbox != nil)
	if err != nil {
		return nil, err
	}
	p.sandbox = got
	it.hs.Close()
	p.stdin = it.stdin
	return p, nil
}

// handshakeError says why a write to the handshake failed: the
// interpreter's end is closed (errGone), or the start ran out of time.
func handshakeError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("handshake: %w", err)
	}
	return fmt.Errorf("%w: handshake: %w", errGone, err)
}

// goneBound is how long a start waits for the end of an interpreter that
// closed its handshake before its run (its session sweep and output
// drain are bounded well within it) before it kills it.
const goneBound = SessionSweepBound + drainBound + time.Second

// sendRights passes fds on f as SCM_RIGHTS on the one byte "F".
func sendRights(f *os.File, fds []int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), []byte{'F'}, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return serr
}

// awaitStatus reads the launcher's one status line: "ok ABI FS NET SCOPED
// SECCOMP" once the run's set-up is in force (all zero without a
// sandbox), "error MESSAGE" from the sandbox, "fail MESSAGE" from the
// launcher. The end of the stream first wraps errGone, or ErrSandbox for
// an interpreter to be confined.
func awaitStatus(ctx context.Context, hs *os.File, sandboxed bool) (Protections, error) {
	stop := context.AfterFunc(ctx, func() { _ = hs.SetReadDeadline(time.Now()) })
	defer stop()
	line, err := bufio.NewReader(hs).ReadString('\n')
	switch {
	case err != nil && ctx.Err() != nil && sandboxed:
		return Protections{}, fmt.Errorf("%w: no sandbox status in time: %w", ErrSandbox, ctx.Err())
	case err != nil && ctx.Err() != nil:
		return Protections{}, ctx.Err()
	case err != nil && line == "" && sandboxed:
		return Protections{}, fmt.Errorf("%w: the interpreter ended before it confined itself: %w", ErrSandbox, err)
	case err != nil && line == "":
		return Protections{}, fmt.Errorf("%w: %w", errGone, err)
	case err != nil:
		return Protections{}, fmt.Errorf("launcher: unfinished status %q", line)
	}
	return parseLaunchStatus(line, sandboxed)
}

// parseLaunchStatus reads one whole status line: only the plan of a
// sandbox (sandboxed), or all zero without one, is accepted; anything
// else is an error, wrapping ErrSandbox for an interpreter to be
// confined that did not say "fail".
func parseLaunchStatus(line string, sandboxed bool) (Protections, error) {
	if msg, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "fail "); ok {
		return Protections{}, fmt.Errorf("launcher: %s", msg)
	}
	got, err := readSandboxStatus(bufio.NewReader(strings.NewReader(line)))
	if err != nil {
		if !sandboxed {
			return Protections{}, fmt.Errorf("launcher: %w", err)
		}
		return Protections{}, err
	}
	if !sandboxed {
		if got != (Protections{}) {
			return Protections{}, fmt.Errorf("launcher: status %q for an interpreter not to be confined", line)
		}
		return got, nil
	}
	if want := Planned(got.ABI); got != want || got.ABI < MinLandlockABI {
		return Protections{}, fmt.Errorf("%w: the interpreter reported %+v in force, not %+v", ErrSandbox, got, want)
	}
	return got, nil
}
