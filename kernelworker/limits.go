package kernelworker

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits are the rlimits the launcher sets on python before exec. Zero
// leaves a limit as inherited. A limit above the host's own hard limit is
// lowered to it: only CAP_SYS_RESOURCE could raise it, and the launcher
// must not fail where the host's operator has been stricter.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU's soft limit. The hard limit is one second
	// more, so SIGXCPU arrives first and SIGKILL follows if python catches
	// it, unless CPUHardUnlimited.
	CPUSeconds int
	// MemoryMB is RLIMIT_AS in MiB (virtual memory, soft = hard).
	MemoryMB int
	// FsizeMB is RLIMIT_FSIZE in MiB (soft = hard).
	FsizeMB int
	// NProc is RLIMIT_NPROC (soft = hard). It counts every process and
	// thread of the user, and root is exempt.
	NProc int
	// CPUHardUnlimited leaves RLIMIT_CPU's hard limit as inherited, for a
	// session kernel whose soft limit the host raises before each cell
	// with prlimit(2).
	CPUHardUnlimited bool
}

// Values of KilledBy that this package can tell from an exit.
const (
	KilledByTimeout     = "timeout"
	KilledByCancelled   = "cancelled"
	KilledByCPULimit    = "cpu_limit"
	KilledByMemoryLimit = "memory_limit"
	KilledByFsizeLimit  = "fsize_limit"
	KilledBySignal      = "signal"
)

// errnoEFBIG is the errno an RLIMIT_FSIZE overrun gives python: python
// ignores SIGXFSZ, so the overrun surfaces as OSError(EFBIG), never as a
// signal death.
const errnoEFBIG = int(unix.EFBIG)

// KilledBy explains a run's end for details.killed_by, or returns "" when
// nothing killed it. exc is the name of the uncaught exception, if any,
// and errno its errno attribute (0 if none); wasTimeout and wasCancelled
// say that the caller itself stopped the run for that reason, which wins
// over anything the exit status suggests.
//
// The limit classifications are best effort: SIGXCPU always means the CPU
// limit; a SIGKILL nobody here asked for means the CPU hard limit when one
// is set; a MemoryError or a crash signal means the memory limit when one
// is set; OSError(EFBIG) means the file size limit when one is set.
func KilledBy(st ExitStatus, lim Limits, exc string, errno int, wasTimeout, wasCancelled bool) string {
	switch {
	case wasTimeout:
		return KilledByTimeout
	case wasCancelled:
		return KilledByCancelled
	}
	if st.Signaled {
		switch st.Signal {
		case syscall.SIGXCPU:
			return KilledByCPULimit
		case syscall.SIGKILL:
			if lim.CPUSeconds > 0 && !st.StopRequested {
				return KilledByCPULimit
			}
		case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGABRT:
			if lim.MemoryMB > 0 {
				return KilledByMemoryLimit
			}
		}
		return KilledBySignal
	}
	switch {
	case exc == "MemoryError" && lim.MemoryMB > 0:
		return KilledByMemoryLimit
	case errno == errnoEFBIG && exc != "" && lim.FsizeMB > 0:
		return KilledByFsizeLimit
	}
	return ""
}

// CellKilledBy explains a cell's uncaught exception that a limit caused,
// for details.killed_by, or returns "": a MemoryError under a memory limit,
// an OSError with errno EFBIG under a file size limit (python ignores
// SIGXFSZ). The kernel survives such a cell with its state; the name only
// says which limit the cell ran into, as a per-call run's result does.
func CellKilledBy(e *Exception, lim Limits) string {
	if e == nil || e.Kind != "error" {
		return ""
	}
	errno := 0
	if e.Name == "OSError" {
		errno = messageErrno(e.Message)
	}
	return KilledBy(ExitStatus{}, lim, e.Name, errno, false, false)
}

// messageErrno reads the errno of an OSError's message, which python
// words "[Errno N] text"; 0 if it has none. EFBIG has no OSError subclass
// of its own, so the name OSError is the one to look at.
func messageErrno(msg string) int {
	rest, ok := strings.CutPrefix(msg, "[Errno ")
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// LimitHeadline is the first line of a result whose run KilledBy
// classified: "Script killed: CPU limit (30 s) exceeded." and the like,
// or "Script killed by signal SIGSEGV.". It returns "" for "", timeout and
// cancelled, which the runner words itself.
func LimitHeadline(killedBy string, lim Limits, st ExitStatus) string {
	switch killedBy {
	case KilledByCPULimit, KilledByMemoryLimit, KilledByFsizeLimit:
		if limitOf(killedBy, lim) <= 0 {
			// An inherited limit, not ours: its value is unknown here.
			return "Script killed: " + limitNames[killedBy] + " exceeded."
		}
	}
	switch killedBy {
	case KilledByCPULimit:
		return "Script killed: CPU limit (" + strconv.Itoa(lim.CPUSeconds) + " s) exceeded."
	case KilledByMemoryLimit:
		return "Script killed: memory limit (" + strconv.Itoa(lim.MemoryMB) + " MB) exceeded."
	case KilledByFsizeLimit:
		return "Script killed: file size limit (" + strconv.Itoa(lim.FsizeMB) + " MB) exceeded."
	case KilledBySignal:
		if st.Signal == 0 {
			// The caller has no exit status at hand (a session cell's
			// result carries only killed_by).
			return "Script killed by a signal."
		}
		return "Script killed by signal " + signalName(st.Signal) + "."
	}
	return ""
}

var limitNames = map[string]string{
	KilledByCPULimit:    "CPU limit",
	KilledByMemoryLimit: "memory limit",
	KilledByFsizeLimit:  "file size limit",
}

func limitOf(killedBy string, lim Limits) int {
	switch killedBy {
	case KilledByCPULimit:
		return lim.CPUSeconds
	case KilledByMemoryLimit:
		return lim.MemoryMB
	}
	return lim.FsizeMB
}

func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(int(sig))
}
