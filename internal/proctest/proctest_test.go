package proctest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarkedFindsAMarkedChildUntilItIsGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), "PROCTEST_MARK=m1")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	require.Eventually(t, func() bool { return len(Marked("PROCTEST_MARK", "m1")) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []int{cmd.Process.Pid}, Marked("PROCTEST_MARK", "m1"))
	assert.Empty(t, Marked("PROCTEST_MARK", "m2"))
	assert.True(t, Alive(cmd.Process.Pid))

	require.NoError(t, cmd.Process.Kill())
	assert.Empty(t, WaitGone([]int{cmd.Process.Pid}, 10*time.Second), "a zombie awaiting its reaper counts as gone")
	assert.Empty(t, Marked("PROCTEST_MARK", "m1"))
}
