package kernelworker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/privatetmp"
	"github.com/executecode/executecode/shimpy"
)

// Names of the staged files in a kernel workspace.
const (
	runnerFile = "runner.py"
	helperFile = shimpy.ModuleName + ".py"
)

// kernel is everything one interpreter holds on the host: its workspace,
// process, pipes and doorbells. The worker actor owns it; release frees
// it all once the process is gone.
type kernel struct {
	dir string
	// releaseDir removes dir (Options.ReleaseWorkspace); nil: a bounded
	// removal.
	releaseDir func(string)
	// sandbox is what the interpreter confined itself with.
	sandbox proc.Protections
	proc    *proc.Process
	bells   *bell.Pair
	stdin   *requestWriter
	// capture is the host's copy of the read end of the pipe behind the
	// kernel's fds 1 and 2: read only once the kernel is gone, for what
	// its drainer had no time to turn into frames.
	capture *os.File
	frames  *frameSink
	stderr  *proc.TailBuffer
	booted  time.Time
}

// Start boots a kernel synchronously (docs/architecture.md, Boot: workspace,
// staged runner and helpers, interpreter, init request) and spawns its
// worker actor as a child of parent. It does not wait for the runner's
// ready. On failure the error wraps ErrStartupFailed and nothing is left
// behind.
func Start(parent actor.SpawnerContext, opts Options) (Handle, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return Handle{}, fmt.Errorf("%w: %w", ErrStartupFailed, err)
	}
	k, err := boot(opts)
	if err != nil {
		return Handle{}, fmt.Errorf("%w: %w", ErrStartupFailed, err)
	}
	w := newWorker(opts, k)
	props := actor.PropsFromProducer(func() actor.Actor { return w })
	pid, err := parent.SpawnNamed(props, "kernel-"+parent.ActorSystem().ProcessRegistry.NextId())
	if err != nil {
		k.kill(opts.KillGrace)
		k.release(opts.Logger)
		return Handle{}, fmt.Errorf("%w: spawn worker: %w", ErrStartupFailed, err)
	}
	k.attach(parent.ActorSystem(), pid)
	return Handle{PID: pid, Bells: k.bells, Workspace: k.dir, Status: w.view}, nil
}

// boot runs the steps of Start; the first failure undoes the
// earlier ones.
func boot(opts Options) (k *kernel, err error) {
	k = &kernel{booted: time.Now(), frames: newFrameSink(), stderr: proc.NewTailBuffer(stderrTailBytes), releaseDir: opts.ReleaseWorkspace}
	defer func() {
		if err != nil {
			k.kill(opts.KillGrace)
			k.release(opts.Logger)
		}
	}()

	if k.dir, err = opts.Workspace(); err != nil {
		return k, fmt.Errorf("workspace: %w", err)
	}
	runner := opts.Runner
	if runner == "" {
		runner = shimpy.Runner()
	}
	// Bootstrap first: nothing of the runner runs before the limits.
	if err = privatetmp.WriteFile(k.dir, runnerFile, []byte(proc.Bootstrap+runner)); err != nil {
		return k, fmt.Errorf("stage runner: %w", err)
	}
	if opts.HelperSource != "" {
		if err = privatetmp.WriteFile(k.dir, helperFile, []byte(opts.HelperSource)); err != nil {
			return k, fmt.Errorf("stage helpers: %w", err)
		}
	}
	if k.bells, err = bell.New(); err != nil {
		return k, fmt.Errorf("doorbells: %w", err)
	}
	captureW, err := k.capturePipe()
	if err != nil {
		return k, fmt.Errorf("capture pipe: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opts.StartupTimeout)
	defer cancel()
	var sandbox *proc.Sandbox
	if opts.Confine != nil {
		if sandbox, err = opts.Confine(ctx, opts.Interpreter, k.dir); err != nil {
			_ = captureW.Close()
			return k, fmt.Errorf("sandbox: %w", err)
		}
	}
	cmd := Command(opts)
	cmd.Main, cmd.Dir = filepath.Join(k.dir, runnerFile), k.dir
	cmd.ExtraFiles = append(k.bells.ChildFiles(), k.capture, captureW)
	cmd.Output, cmd.Stderr, cmd.Sandbox = k.frames, k.stderr, sandbox
	k.proc, err = opts.Spawner.Start(ctx, cmd)
	// The child has its copies (or never will): the host keeps only its
	// own ends, so EOFs mean what they say.
	_ = captureW.Close()
	_ = k.bells.CloseChildEnds()
	if err != nil {
		return k, fmt.Errorf("spawn: %w", err)
	}
	k.sandbox = k.proc.Sandbox()
	// The request channel is fd 0, a socket the Spawner made: every
	// cell's bridge token travels in its eval request, and another
	// process of the user can open a pipe again through /proc/<pid>/fd,
	// but not a socket. The host's end is non-blocking, so its writes can
	// have a deadline.
	stdinW := k.proc.Stdin()
	k.stdin = newRequestWriter(stdinW)

	// The request channel is empty, so this write cannot block for long; the
	// deadline only guards against the impossible.
	line, err := requestLine(map[string]any{"v": 1, "type": "init", "cwd": opts.Cwd})
	if err == nil {
		_ = stdinW.SetWriteDeadline(time.Now().Add(opts.StartupTimeout))
		_, err = stdinW.Write(line)
		_ = stdinW.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		return k, fmt.Errorf("write init: %w", err)
	}
	return k, nil
}

// Command is the interpreter command of every kernel of opts but for what
// is each kernel's own (its workspace, pipes, output, the sandbox's
// rules): python3 -u on the runner, fd 0 a socket, stderr apart, so a
// warm interpreter of this shape (proc.Spawner.KeepWarm) serves its
// kernels. The runner is compiled ahead, and the helper set names it.
func Command(opts Options) proc.Command {
	opts = opts.withDefaults()
	runner := opts.Runner
	if runner == "" {
		runner = shimpy.Runner()
	}
	helpers := sha256.Sum256([]byte(opts.HelperSource))
	cmd := proc.Command{
		Path:        opts.Interpreter,
		Flags:       []string{"-u"},
		Main:        runnerFile,
		MainSource:  proc.Bootstrap + runner,
		Dir:         opts.Cwd,
		Limits:      opts.Limits,
		StdinSocket: true,
		Stderr:      io.Discard,
		Tag:         "kernel " + hex.EncodeToString(helpers[:]),
	}
	if opts.HelperSource != "" {
		cmd.Module = proc.ModuleSource{Name: helperFile, Source: opts.HelperSource}
	}
	if opts.Confine != nil {
		cmd.Sandbox = &proc.Sandbox{}
	}
	return cmd
}

// attach starts delivering the kernel's frames and its exit to pid.
func (k *kernel) attach(system *actor.ActorSystem, pid *actor.PID) {
	k.frames.attach(system, pid)
	proc := k.proc
	go func() {
		<-proc.Done()
		system.Root.Send(pid, &processExited{status: proc.Exit()})
	}()
}

// kill ends the process group with SIGKILL and waits, at most grace, for
// the interpreter to be reaped.
func (k *kernel) kill(grace time.Duration) {
	// Nobody reads frames any more; the pipe must still drain for the
	// process to count as done.
	k.frames.close()
	if k.proc == nil {
		return
	}
	k.proc.Kill()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-k.proc.Done():
	case <-t.C:
	}
}

// release frees the host side: pipes, doorbells and the workspace. The
// process must be gone (or given up on) first.
func (k *kernel) release(logger *zerolog.Logger) {
	k.frames.close()
	if k.stdin != nil {
		k.stdin.close()
	}
	if k.bells != nil {
		_ = k.bells.Close()
	}
	if k.capture != nil {
		_ = k.capture.Close()
		k.capture = nil
	}
	if k.dir != "" {
		if k.releaseDir != nil {
			k.releaseDir(k.dir)
		} else {
			privatetmp.Teardown(k.dir, privatetmp.LabelWorkspace, logger)
		}
		k.dir = ""
	}
}

// evalRequest is the eval line (docs/protocol.md, Requests), a struct
// rather than a map: it is encoded for every cell.
type evalRequest struct {
	V      int         `json:"v"`
	Type   string      `json:"type"`
	ID     string      `json:"id"`
	Code   string      `json:"code"`
	Cwd    string      `json:"cwd"`
	Bridge *evalBridge `json:"bridge,omitempty"`
}

type evalBridge struct {
	Dir          string `json:"dir"`
	Token        string `json:"token"`
	MaxTextBytes int    `json:"max_text_bytes"`
}

// requestLine encodes one request as a JSON line (docs/protocol.md,
// Requests).
func requestLine(req any) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// The runner finds the capture pipe's ends at these descriptors, after
// the doorbells (shimpy/runner.py, CAPTURE).
const (
	captureReadFD  = 5
	captureWriteFD = 6
)

// leftoverLimit bounds what is read from the capture pipe after the
// kernel ended: more than a pipe holds by default, and a script that
// enlarged its pipe still cannot make the host read without end.
const leftoverLimit = 1 << 20

// capturePipe makes the pipe the runner puts behind fds 1 and 2, and
// returns its write end for the child; the host keeps the read end. The
// pipe is the host's, not the runner's own, so that what is still in it
// when the kernel dies can be read by the host.
func (k *kernel) capturePipe() (*os.File, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	k.capture = os.NewFile(uintptr(fds[0]), "kernel-capture")
	return os.NewFile(uintptr(fds[1]), "kernel-capture-child"), nil
}

// leftover is what the kernel wrote to its capture pipe and its runner
// never read: the output of its last moments (an os._exit, a signal).
// It is read without blocking, since a process that left the kernel's
// session may still hold the write end, and only once the kernel is
// gone: before that the runner is the pipe's one reader.
func (k *kernel) leftover() []byte {
	if k.capture == nil {
		return nil
	}
	fd := int(k.capture.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil
	}
	var out []byte
	buf := make([]byte, 64<<10)
	for len(out) < leftoverLimit {
		n, err := unix.Read(fd, buf[:min(len(buf), leftoverLimit-len(out))])
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			break
		}
		out = append(out, buf[:n]...)
	}
	return out
}
