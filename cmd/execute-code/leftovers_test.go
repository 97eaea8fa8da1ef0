package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// killedHostScript spawns a grandchild that hops to a group of its own,
// says so with notify and stays busy, so the host can be killed mid-run.
const killedHostScript = `import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], process_group=0)
notify("started")
time.sleep(120)
`

// stagingLeft lists what is left under tmp's staging roots, relative to
// tmp, sorted.
func stagingLeft(t *testing.T, tmp string) []string {
	t.Helper()
	var left []string
	roots, _ := filepath.Glob(filepath.Join(tmp, "execute-code-private-*"))
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
			if err == nil {
				rel, _ := filepath.Rel(tmp, p)
				left = append(left, rel)
			}
			return nil
		})
	}
	sort.Strings(left)
	return left
}

// waitForNotify reads lines until one carries msg.
func waitForNotify(t *testing.T, r *bufio.Reader, msg string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "the host ended before notifying %q", msg)
		if strings.Contains(line, msg) {
			return
		}
	}
}

// A host killed with SIGKILL mid-run leaves neither a process nor its
// staging root (scripts, the shim and its token): its guard kills the
// processes and then removes the root. run in both modes, and serve with
// a kernel and a per-call run at once.
func TestHostKilledMidRunLeavesNoProcessAndNoStagingRoot(t *testing.T) {
	script, _ := json.Marshal(killedHostScript)
	for _, tc := range []struct {
		name  string
		args  []string
		stdin []string
		fromStdout,
		notifies int
	}{
		{name: "run per_call", args: []string{"run", "-"}, stdin: []string{killedHostScript}, notifies: 1},
		{name: "run session", args: []string{"run", "--mode", "session", "-"}, stdin: []string{killedHostScript}, notifies: 1},
		{name: "serve", args: []string{"serve"}, fromStdout: 1, notifies: 2, stdin: []string{
			`{"id":1,"op":"attach","session":"s1","agent":"main"}` + "\n",
			fmt.Sprintf(`{"id":2,"op":"execute","session":"s1","script":%s,"timeout_ms":60000}`+"\n", script),
			fmt.Sprintf(`{"id":3,"op":"execute","script":%s,"timeout_ms":60000}`+"\n", script),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark, tmp := newMark(), t.TempDir()
			t.Cleanup(func() {
				for _, pid := range proctest.Marked(markEnv, mark) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			cmd := exec.Command(binary, append(tc.args[:1:1], append([]string{"--root", t.TempDir()}, tc.args[1:]...)...)...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, markEnv+"="+mark)
			in, err := cmd.StdinPipe()
			require.NoError(t, err)
			var out *bufio.Reader
			if tc.fromStdout == 1 {
				o, err := cmd.StdoutPipe()
				require.NoError(t, err)
				out = bufio.NewReader(o)
			} else {
				e, err := cmd.StderrPipe()
				require.NoError(t, err)
				out = bufio.NewReader(e)
			}
			require.NoError(t, cmd.Start())
			waited := false
			t.Cleanup(func() {
				_ = in.Close()
				if !waited {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})
			for _, s := range tc.stdin {
				_, err := in.Write([]byte(s))
				require.NoError(t, err)
			}
			if tc.fromStdout == 0 {
				require.NoError(t, in.Close()) // run reads the script to its end
			}
			for range tc.notifies {
				waitForNotify(t, out, "started")
			}
			// The host, each interpreter with its grandchild, and the guard,
			// which the host starts beside the run and may still be starting.
			var before []int
			require.Eventually(t, func() bool {
				before = proctest.Marked(markEnv, mark)
				return len(before) >= 2*tc.notifies+2
			}, 10*time.Second, 10*time.Millisecond, "interpreters, their children and the guard run")
			require.NotEmpty(t, stagingLeft(t, tmp), "the host staged its runs")

			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			waited = true
			killed := time.Now()
			left := proctest.WaitGone(before, 5*time.Second)
			gone := time.Since(killed)
			assert.Empty(t, left, "processes left after the host's SIGKILL")
			assert.Empty(t, proctest.Marked(markEnv, mark), "processes left after the host's SIGKILL")
			// The guard removes the root just before it exits, so once every
			// process is gone, so is the root.
			assert.Empty(t, stagingLeft(t, tmp), "staging left after the host's SIGKILL")
			t.Logf("%s: %d processes gone %s after the host's SIGKILL; staging left: %v",
				tc.name, len(before), gone.Round(time.Millisecond), stagingLeft(t, tmp))
		})
	}
}

// A clean run that spilled leaves only what must outlive it: the spill
// (its path is in the result) in its root, beside the owner marker that
// lets a later start reap it after 24 hours.
func TestCleanRunThatSpilledLeavesOnlyItsSpill(t *testing.T) {
	tmp, dir := t.TempDir(), t.TempDir()
	cmd := exec.Command(binary, "run", "--json", "-")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("print('x' * 200000)\ntext('spilled')\n")
	out, err := cmd.Output()
	require.NoError(t, err)
	var res struct {
		Details struct {
			FullOutputPath string `json:"full_output_path"`
		} `json:"details"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.NotEmpty(t, res.Details.FullOutputPath)
	rel, err := filepath.Rel(tmp, res.Details.FullOutputPath)
	require.NoError(t, err)
	root := filepath.Dir(rel)
	assert.Equal(t, []string{root, filepath.Join(root, ".execute-code-owner"), rel}, stagingLeft(t, tmp))
}

// A stale root holding only its owner marker is removed by the next
// start, and so is one that holds nothing but expired spills once the
// next start has reaped them.
func TestNextStartRemovesMarkerOnlyAndExpiredStaleRoots(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	marker := []byte("elsewhere\n" + strconv.Itoa(dead.Process.Pid) + "\n")
	plant := func(name string, spill bool) {
		root := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(root, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(root, ".execute-code-owner"), marker, 0o600))
		if spill {
			p := filepath.Join(root, "spill-AAAAAAAAAA")
			require.NoError(t, os.WriteFile(p, []byte("old output"), 0o600))
			old := time.Now().Add(-48 * time.Hour)
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	plant("execute-code-private-markeronly", false)
	plant("execute-code-private-expiredspl", true)
	require.Len(t, stagingLeft(t, tmp), 5)

	cmd := exec.Command(binary, "run", "-")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader("text('next start')")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Empty(t, stagingLeft(t, tmp))
}
