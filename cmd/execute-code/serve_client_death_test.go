package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// A client that dies mid-cell (its ends of both pipes closed) is the serve
// connection's owner dying: serve ends on its own within the running
// cell's timeout plus the escalation, exits cleanly, and leaves no
// process and no file behind.
func TestServeClientDeathMidCellLeavesNothing(t *testing.T) {
	mark, tmp := newMark(), t.TempDir()
	t.Cleanup(func() {
		for _, pid := range proctest.Marked(markEnv, mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cmd := exec.Command(binary, "serve", "--root", t.TempDir())
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, markEnv+"="+mark)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewReader(out)
	script, _ := json.Marshal(busyScript)
	for _, l := range []string{
		`{"id":1,"op":"attach","session":"s","agent":"a"}`,
		fmt.Sprintf(`{"id":2,"op":"execute","session":"s","script":%s,"timeout_ms":2000}`, script),
		`{"id":3,"op":"execute","session":"s","script":"text('queued')"}`,
	} {
		_, err := io.WriteString(in, l+"\n")
		require.NoError(t, err)
	}
	for {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, `"notify"`) {
			break
		}
	}

	// The client dies: both of its pipe ends close.
	require.NoError(t, in.Close())
	require.NoError(t, out.Close())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		assert.NoError(t, err, "serve exits cleanly, not by SIGPIPE")
	case <-time.After(2*time.Second + 3*time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("serve outlived its dead client")
	}
	assert.Empty(t, proctest.WaitGone(proctest.Marked(markEnv, mark), time.Second), "no process left")
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	assert.Empty(t, left, "no staging root left")
}
