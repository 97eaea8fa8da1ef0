package proc

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space on every architecture.
const userHZ = 100

// SetCPUBudget gives process pid budget more CPU time from now by raising
// its soft RLIMIT_CPU to (CPU used so far + budget), rounded up to whole
// seconds, the limit's unit.
// RLIMIT_CPU counts a process's whole life, so a persistent kernel needs
// this before every cell. A zero budget lifts the soft limit to the hard
// one. The hard limit is never touched: the kernel is started with it
// unlimited.
func SetCPUBudget(pid int, budget time.Duration) error {
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, nil, &lim); err != nil {
		return fmt.Errorf("read cpu limit: %w", err)
	}
	soft := lim.Max
	if budget > 0 {
		used, err := cpuUsed(pid)
		if err != nil {
			return err
		}
		soft = uint64(math.Ceil((used + budget).Seconds()))
		if lim.Max != unix.RLIM_INFINITY && soft > lim.Max {
			soft = lim.Max
		}
	}
	if soft == lim.Cur {
		return nil
	}
	lim.Cur = soft
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil); err != nil {
		return fmt.Errorf("set cpu limit: %w", err)
	}
	return nil
}

// cpuUsed is the user plus system CPU time of every thread of pid, the
// time RLIMIT_CPU measures.
func cpuUsed(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read cpu time: %w", err)
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after its closing parenthesis are plain numbers.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, fmt.Errorf("read cpu time: malformed stat")
	}
	fields := bytes.Fields(b[end+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("read cpu time: malformed stat")
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read cpu time: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
