package proc

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits are the rlimits the Spawner sets on python before its first
// statement (see Bootstrap). Zero leaves a limit as inherited. A limit
// above the inherited hard limit is lowered to it: only CAP_SYS_RESOURCE
// could raise it, and a start must not fail where the host's operator has
// been stricter.
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
	// with prlimit(2) before each cell.
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

// KilledBy explains a run's end from its exit for details.killed_by, or
// returns "" when nothing killed it. exc is the name of the uncaught
// exception, if any, and errno its errno attribute (0 if none). A run the
// caller stopped itself (timeout, cancel) is the caller's to name: that
// wins over anything the exit status suggests.
//
// The limit classifications are best effort: SIGXCPU always means the CPU
// limit; a SIGKILL nobody here asked for means the CPU hard limit when one
// is set; a MemoryError or a crash signal means the memory limit when one
// is set; OSError(EFBIG) means the file size limit when one is set.
func KilledBy(st ExitStatus, lim Limits, exc string, errno int) string {
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
