package reexec

import (
	"os"
	"testing"
	"time"
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
