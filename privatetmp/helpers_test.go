package privatetmp

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nobody is a uid this process is not: objects chowned to it must fail
// the owner check.
const nobody = 65534

// withSuffixes makes the next reservations draw the given suffixes in
// order (the last one repeats), so a test can plant objects at the names
// a reservation will try first.
func withSuffixes(t *testing.T, suffixes ...string) {
	t.Helper()
	old := randomSuffix
	i := 0
	randomSuffix = func() string {
		s := suffixes[min(i, len(suffixes)-1)]
		i++
		return s
	}
	t.Cleanup(func() { randomSuffix = old })
}

// withUmask sets the process umask for the rest of the test. The umask is
// process-wide: tests using it must not run in parallel with anything.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// requireChown skips tests that need to give a file away to another uid.
func requireChown(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner to another uid needs root")
	}
}

// deadPID returns the pid of a process that has run and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	require.NoError(t, cmd.Run())
	pid := cmd.Process.Pid
	require.False(t, pidAlive(pid), "pid %d was reused already", pid)
	return pid
}

func markerFor(pid int) string { return "old-node\n" + strconv.Itoa(pid) + "\n" }

// plantRoot makes <tmp>/<name> as a previous node would have left it: a
// 0700 directory with a 0600 owner marker holding content.
func plantRoot(t *testing.T, tmp, name, content string) string {
	t.Helper()
	root := filepath.Join(tmp, name)
	require.NoError(t, os.Mkdir(root, 0o700))
	require.NoError(t, os.Chmod(root, 0o700))
	writePrivate(t, filepath.Join(root, markerName), content)
	return root
}

func writePrivate(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	require.NoError(t, os.Chmod(path, 0o600))
}

// plantSpill writes a regular 0600 file whose mtime is age in the past.
func plantSpill(t *testing.T, dir, name string, age time.Duration) string {
	t.Helper()
	path := filepath.Join(dir, name)
	writePrivate(t, path, "spilled output")
	setAge(t, path, age)
	return path
}

func setAge(t *testing.T, path string, age time.Duration) {
	t.Helper()
	at := time.Now().Add(-age)
	require.NoError(t, os.Chtimes(path, at, at))
}

// snapshot records every entry under dir (lstat, links not followed) with
// type, mode, size, mtime and link target, to prove a tree was not changed.
// dir itself is left out.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() {
				return fs.SkipDir // unreadable to a non-root user; its entry is recorded
			}
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." {
			return nil // its mtime moves whenever an entry is added beside the plants
		}
		target, _ := os.Readlink(path)
		out[rel] = fmt.Sprintf("%v %d %d %s", fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), target)
		return nil
	})
	require.NoError(t, err)
	return out
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}
