package reexec

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The launcher is this very binary, re-executed through /proc/self/exe with
// these two variables set: Go has no pre-exec hook, so the rlimits and the
// rest of the child's set-up are applied by a tiny Go process that then
// becomes python with execve. Both variables are removed from python's
// environment.
const (
	LauncherEnv     = "EXECUTE_CODE_LAUNCHER"
	LauncherSpecEnv = "EXECUTE_CODE_LAUNCHER_SPEC"
	LauncherArgv0   = "execute-code-launcher"
	arenaEnv        = "MALLOC_ARENA_MAX"
)

// Launcher exit statuses, as a shell reports them.
const (
	exitSetup    = 125
	exitExec     = 126
	exitNotFound = 127
)

const rlimInfinity = ^uint64(0)

// Spec is what the host tells the launcher besides python's argv (which
// travels as the launcher's own argv[1:]).
type Spec struct {
	ParentPID int `json:"ppid"`
	// Files is how many descriptors python is given (0, 1, 2 and the
	// extra files); every descriptor above them is one the host inherited
	// without close-on-exec, and python must not get it.
	Files            int  `json:"files"`
	CPUSeconds       int  `json:"cpu_s,omitempty"`
	CPUHardUnlimited bool `json:"cpu_hard_unlimited,omitempty"`
	MemoryMB         int  `json:"as_mb,omitempty"`
	FsizeMB          int  `json:"fsize_mb,omitempty"`
	NProc            int  `json:"nproc,omitempty"`
}

// launcherMsg is allocated before any rlimit is set: after RLIMIT_AS the
// Go runtime may die on its next heap growth, so
// the failure path must not allocate either.
var launcherMsg [128]byte

// sigDefault is a zeroed kernel struct sigaction: handler SIG_DFL, no
// flags, empty mask.
var sigDefault [4]uint64

// launcherFail writes "execute-code launcher: <step> failed errno=N" to
// stderr (the merged output the host captures) and exits with code. It
// runs inside the no-allocation window, so it formats by hand and is not
// race-instrumented (the race runtime itself maps memory for its traces).
//
//go:norace
func launcherFail(step string, errno syscall.Errno, code int) {
	b := launcherMsg[:0]
	b = append(b, "execute-code launcher: "...)
	b = append(b, step...)
	b = append(b, " failed errno="...)
	var digits [20]byte
	i := len(digits)
	for n := uint64(errno); ; n /= 10 {
		i--
		digits[i] = byte('0' + n%10)
		if n < 10 {
			break
		}
	}
	b = append(b, digits[i:]...)
	b = append(b, '\n')
	_, _, _ = syscall.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	for {
		_, _, _ = syscall.RawSyscall(unix.SYS_EXIT_GROUP, uintptr(code), 0, 0)
	}
}

func errnoOf(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return unix.EINVAL
}

// launch never returns: it becomes python or exits. The order (thread
// pinned, descriptors marked, SIGINT reset, rlimits with RLIMIT_AS last,
// execve) must not change: nothing may allocate after the first rlimit.
func launch() {
	// The final execve must come from the thread that set everything up
	// (the parent-death signal is per thread).
	runtime.LockOSThread()

	var spec Spec
	if err := json.Unmarshal([]byte(os.Getenv(LauncherSpecEnv)), &spec); err != nil || len(os.Args) < 2 {
		launcherFail("spec", unix.EINVAL, exitSetup)
	}

	// The host already asked for Setsid, so EPERM (already a session
	// leader) is the expected answer.
	if _, err := unix.Setsid(); err != nil {
		sid, serr := unix.Getsid(0)
		if err != unix.EPERM || serr != nil || sid != unix.Getpid() {
			launcherFail("setsid", errnoOf(err), exitSetup)
		}
	}

	// Harmless repetition of the host's SysProcAttr.Pdeathsig; the ppid
	// check catches a host that died before the prctl took effect.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		launcherFail("pdeathsig", errnoOf(err), exitSetup)
	}
	if unix.Getppid() != spec.ParentPID {
		launcherFail("parent-check", unix.ESRCH, exitSetup)
	}

	closeInheritedOnExec(spec.Files)

	env := Environ(os.Environ(), spec.MemoryMB > 0)
	steps := planLimits(spec)

	// Everything execve needs is allocated now.
	path, err := syscall.BytePtrFromString(os.Args[1])
	if err != nil {
		launcherFail("argv", errnoOf(err), exitSetup)
	}
	argv, err := syscall.SlicePtrFromStrings(os.Args[1:])
	if err != nil {
		launcherFail("argv", errnoOf(err), exitSetup)
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		launcherFail("env", errnoOf(err), exitSetup)
	}
	// No collection may start in the window below.
	debug.SetGCPercent(-1)
	execWithLimits(&steps, path, &argv[0], &envp[0])
}

// execWithLimits is the no-allocation window (trap 1): raw syscalls only,
// no race instrumentation, no goroutine started, nothing that could make
// the runtime map memory or create a thread once RLIMIT_AS is in force.
//
// SIGINT is set to SIG_DFL with a raw rt_sigaction rather than by
// installing a Go handler (os/signal.Notify): execve keeps an ignored
// signal ignored, and Notify would start a goroutine that may first run,
// and need a thread, after the limits.
//
//go:norace
func execWithLimits(steps *[4]rlimitStep, path *byte, argv, envp **byte) {
	_, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(syscall.SIGINT),
		uintptr(unsafe.Pointer(&sigDefault)), 0, 8, 0, 0)
	if e != 0 {
		launcherFail("sigint-reset", e, exitSetup)
	}
	for i := range steps {
		if !steps[i].set {
			continue
		}
		_, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(steps[i].resource),
			uintptr(unsafe.Pointer(&steps[i].lim)), 0, 0, 0)
		if e != 0 {
			launcherFail(steps[i].step, e, exitSetup)
		}
	}
	_, _, e = syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(argv)), uintptr(unsafe.Pointer(envp)))
	code := exitExec
	if e == unix.ENOENT {
		code = exitNotFound
	}
	launcherFail("exec", e, code)
}

// closeInheritedOnExec marks every descriptor from keep up close-on-exec,
// so python gets exactly the files the host gave it: Go's fork passes on
// whatever the host itself inherited without close-on-exec (a service
// manager's, a shell's or a job runner's descriptors), and a script must
// never hold a descriptor the runtime would not give it. Marking rather
// than closing leaves the launcher's own runtime
// descriptors usable until the execve.
func closeInheritedOnExec(keep int) {
	if keep < 3 {
		keep = 3
	}
	err := unix.CloseRange(uint(keep), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return
	}
	// Before Linux 5.11: walk the descriptor table instead.
	names, derr := os.ReadDir("/proc/self/fd")
	if derr != nil {
		launcherFail("close-inherited", errnoOf(err), exitSetup)
	}
	for _, n := range names {
		fd, cerr := strconv.Atoi(n.Name())
		if cerr != nil || fd < keep {
			continue
		}
		// The directory's own descriptor is already gone, or is
		// close-on-exec: EBADF is fine.
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
}

// Environ is env without the launcher's and the guard's variables, plus
// MALLOC_ARENA_MAX=2 when capArenas and env does not choose a value: under
// RLIMIT_AS glibc's 64 MiB per-thread arenas leave room for only a dozen
// threads (trap 7).
func Environ(env []string, capArenas bool) []string {
	out := make([]string, 0, len(env)+1)
	hasArena := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case LauncherEnv, LauncherSpecEnv, GuardEnv:
			continue
		case arenaEnv:
			hasArena = true
		}
		out = append(out, kv)
	}
	if capArenas && !hasArena {
		out = append(out, arenaEnv+"=2")
	}
	return out
}

type rlimitStep struct {
	resource int
	step     string
	lim      unix.Rlimit
	set      bool
}

// planLimits computes every rlimit before the first is set. RLIMIT_AS
// comes last so the Go runtime has no reason to map memory after it;
// RLIMIT_NPROC comes late because the runtime could not start a thread
// once the user is over it.
func planLimits(spec Spec) [4]rlimitStep {
	steps := [4]rlimitStep{
		{resource: unix.RLIMIT_CPU, step: "rlimit-cpu"},
		{resource: unix.RLIMIT_FSIZE, step: "rlimit-fsize"},
		{resource: unix.RLIMIT_NPROC, step: "rlimit-nproc"},
		{resource: unix.RLIMIT_AS, step: "rlimit-as"},
	}
	want := [4]uint64{uint64(max(spec.CPUSeconds, 0)), mib(spec.FsizeMB), uint64(max(spec.NProc, 0)), mib(spec.MemoryMB)}
	for i := range steps {
		if want[i] == 0 {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(steps[i].resource, &cur); err != nil {
			launcherFail(steps[i].step, errnoOf(err), exitSetup)
		}
		// Without CAP_SYS_RESOURCE a hard limit cannot be raised: stay
		// within the one inherited rather than fail.
		clamp := func(v uint64) uint64 {
			if cur.Max != rlimInfinity && v > cur.Max {
				return cur.Max
			}
			return v
		}
		soft, hard := clamp(want[i]), clamp(want[i])
		if steps[i].resource == unix.RLIMIT_CPU {
			// One second of grace: SIGXCPU first, SIGKILL if it is caught.
			hard = clamp(want[i] + 1)
			if spec.CPUHardUnlimited {
				hard = cur.Max
			}
		}
		steps[i].lim = unix.Rlimit{Cur: soft, Max: hard}
		steps[i].set = true
	}
	return steps
}

func mib(n int) uint64 {
	if n <= 0 {
		return 0
	}
	return uint64(n) << 20
}
