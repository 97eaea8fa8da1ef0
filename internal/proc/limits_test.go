package proc

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func signaled(sig syscall.Signal) ExitStatus {
	return ExitStatus{Code: 128 + int(sig), Signaled: true, Signal: sig}
}

func TestKilledByExplainsEveryDeath(t *testing.T) {
	all := Limits{CPUSeconds: 30, MemoryMB: 512, FsizeMB: 50, NProc: 50}
	none := Limits{}
	ourKill := signaled(syscall.SIGKILL)
	ourKill.StopRequested = true

	tests := []struct {
		name  string
		st    ExitStatus
		lim   Limits
		exc   string
		errno int
		want  string
	}{
		{name: "clean exit", st: ExitStatus{}, lim: all},
		{name: "script error", st: ExitStatus{Code: 1}, lim: all, exc: "ValueError"},
		{name: "SIGXCPU", st: signaled(syscall.SIGXCPU), lim: all, want: KilledByCPULimit},
		{name: "SIGXCPU from an inherited limit", st: signaled(syscall.SIGXCPU), lim: none, want: KilledByCPULimit},
		{name: "SIGKILL at the CPU hard limit", st: signaled(syscall.SIGKILL), lim: all, want: KilledByCPULimit},
		{name: "SIGKILL we sent", st: ourKill, lim: all, want: KilledBySignal},
		{name: "SIGKILL without CPU limit", st: signaled(syscall.SIGKILL), lim: none, want: KilledBySignal},
		{name: "MemoryError under AS limit", st: ExitStatus{Code: 1}, lim: all, exc: "MemoryError", want: KilledByMemoryLimit},
		{name: "MemoryError without limit", st: ExitStatus{Code: 1}, lim: none, exc: "MemoryError"},
		{name: "SIGSEGV under AS limit", st: signaled(syscall.SIGSEGV), lim: all, want: KilledByMemoryLimit},
		{name: "SIGBUS under AS limit", st: signaled(syscall.SIGBUS), lim: all, want: KilledByMemoryLimit},
		{name: "SIGABRT under AS limit", st: signaled(syscall.SIGABRT), lim: all, want: KilledByMemoryLimit},
		{name: "SIGSEGV without limit", st: signaled(syscall.SIGSEGV), lim: none, want: KilledBySignal},
		{name: "EFBIG under fsize limit", st: ExitStatus{Code: 1}, lim: all, exc: "OSError", errno: 27, want: KilledByFsizeLimit},
		{name: "EFBIG without limit", st: ExitStatus{Code: 1}, lim: none, exc: "OSError", errno: 27},
		{name: "other OSError", st: ExitStatus{Code: 1}, lim: all, exc: "OSError", errno: 2},
		{name: "SIGTERM", st: signaled(syscall.SIGTERM), lim: all, want: KilledBySignal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, KilledBy(tc.st, tc.lim, tc.exc, tc.errno))
		})
	}
}

func TestLimitHeadlineNamesTheLimit(t *testing.T) {
	lim := Limits{CPUSeconds: 30, MemoryMB: 512, FsizeMB: 50}
	tests := []struct {
		killedBy string
		lim      Limits
		st       ExitStatus
		want     string
	}{
		{KilledByCPULimit, lim, signaled(syscall.SIGXCPU), "Script killed: CPU limit (30 s) exceeded."},
		{KilledByMemoryLimit, lim, ExitStatus{Code: 1}, "Script killed: memory limit (512 MB) exceeded."},
		{KilledByFsizeLimit, lim, ExitStatus{Code: 1}, "Script killed: file size limit (50 MB) exceeded."},
		{KilledByCPULimit, Limits{}, signaled(syscall.SIGXCPU), "Script killed: CPU limit exceeded."},
		{KilledBySignal, lim, signaled(syscall.SIGSEGV), "Script killed by signal SIGSEGV."},
		{KilledBySignal, lim, signaled(syscall.SIGTERM), "Script killed by signal SIGTERM."},
		{KilledBySignal, lim, ExitStatus{}, "Script killed by a signal."},
		{KilledByTimeout, lim, signaled(syscall.SIGKILL), ""},
		{KilledByCancelled, lim, signaled(syscall.SIGKILL), ""},
		{"", lim, ExitStatus{}, ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, LimitHeadline(tc.killedBy, tc.lim, tc.st), tc.killedBy)
	}
}
