package sweep

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// dead reports whether pid is gone or a zombie.
func dead(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	st, ok := parseStat(b)
	return !ok || st.zombie
}

// A member that moved to a process group of its own is killed, whether
// the pass probes the pids handed out since the leader's fork or lists
// /proc; the leader's own zombie, which pins the id, is left to its
// parent.
func TestKillSessionKillsAMemberInAGroupOfItsOwn(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	for _, tc := range []struct {
		name  string
		probe bool
	}{{"probing", true}, {"listing", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var forks0 uint64
			if tc.probe {
				var ok bool
				forks0, ok = ForkCount()
				require.True(t, ok)
			}
			cmd := exec.Command(python, "-c", `import os, time
if os.fork() == 0:
    os.setpgid(0, 0)
    print(os.getpid(), flush=True)
    time.sleep(600)
`)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			leader := cmd.Process.Pid
			line, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err)
			member, err := strconv.Atoi(strings.TrimSpace(line))
			require.NoError(t, err)
			t.Cleanup(func() { _ = unix.Kill(member, unix.SIGKILL) })
			var info unix.Siginfo
			require.NoError(t, unix.Waitid(unix.P_PID, leader, &info, unix.WEXITED|unix.WNOWAIT, nil))
			require.False(t, dead(member))

			res := killSessions([]int{leader}, false, forks0, 10*time.Second)
			assert.True(t, res.Complete, "%+v", res)
			assert.Equal(t, 1, res.Killed, "%+v", res)
			if tc.probe {
				assert.Zero(t, res.Passes, "no /proc listing: %+v", res)
			} else {
				assert.Zero(t, res.Probes, "%+v", res)
			}
			assert.True(t, dead(member), "the member is killed")
			_ = cmd.Wait()
		})
	}
}

func TestParseForksReadsTheProcessesLine(t *testing.T) {
	v, ok := parseForks([]byte("cpu  1 2 3\nctxt 99\nbtime 5\nprocesses 123456\nprocs_running 2\n"))
	assert.True(t, ok)
	assert.Equal(t, uint64(123456), v)
	_, ok = parseForks([]byte("cpu 1\nprocs_running 2\n"))
	assert.False(t, ok)
}
