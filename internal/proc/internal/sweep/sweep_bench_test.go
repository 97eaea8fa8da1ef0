package sweep

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkKillSessionsOfAnEmptySession is what every run's end pays when
// python left nobody behind: one /proc pass that finds no member. The
// session swept is the one whose id is the benchmark's own pid, which
// only a session leader with that pid could have started: nobody is in it.
func BenchmarkKillSessionsOfAnEmptySession(b *testing.B) {
	ids := []int{os.Getpid()} // our session is not our pid: nobody is in it
	procs, _ := os.ReadDir("/proc")
	b.ReportMetric(float64(len(procs)), "proc_entries")
	for b.Loop() {
		if res := KillSessions(ids, false, time.Second); !res.Complete || res.Passes != 1 || res.Killed != 0 {
			b.Fatalf("unexpected sweep %+v", res)
		}
	}
}

// BenchmarkKillSessionOfALeaderThatLeftNobody is the same end of a run as
// the host pays it: the leader's fork is counted first, so a pass probes
// only the pids handed out since.
func BenchmarkKillSessionOfALeaderThatLeftNobody(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		forks0, ok := ForkCount()
		if !ok {
			b.Skip("no fork count in /proc/stat")
		}
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid := cmd.Process.Pid
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) // the zombie pins the id
		b.StartTimer()
		res := KillSession(pid, forks0, time.Second)
		b.StopTimer()
		_ = cmd.Wait()
		if !res.Complete || res.Killed != 0 {
			b.Fatalf("unexpected sweep %+v", res)
		}
		b.ReportMetric(float64(res.Probes), "probe_passes/op")
		b.StartTimer()
	}
}
