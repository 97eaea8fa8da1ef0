package proctest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || len(stat) <= i+2 || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

// WaitGone polls until none of pids is alive or within has passed, and
// returns those still alive.
func WaitGone(pids []int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		var left []int
		for _, p := range pids {
			if Alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Marked lists the live processes, this one excepted, whose environment
// holds name=value.
func Marked(name, value string) []int {
	needle := []byte(name + "=" + value)
	var pids []int
	eachPid(func(pid int) {
		if !Alive(pid) {
			return
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			return
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, needle) {
				pids = append(pids, pid)
				break
			}
		}
	})
	return pids
}

// eachPid calls f for every pid listed in /proc but this process's. The
// listing is read a few entries at a time, each examined at once: a
// listing read whole first would miss a process that forks and exits
// while the rest is examined (its child is younger than the listing),
// and a chain of such processes could never be seen on a busy machine.
// Read this way, a child forked meanwhile has a higher pid and is still
// listed.
func eachPid(f func(pid int)) {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	self := os.Getpid()
	buf := make([]byte, 1024)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			b = b[reclen:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			pid, err := strconv.Atoi(string(name))
			if err != nil || pid == self {
				continue
			}
			f(pid)
		}
	}
}

// InSession lists the live processes, this one excepted, whose session
// id is sid: what a process that hopped to a group of its own is still
// found by.
func InSession(sid int) []int {
	var pids []int
	eachPid(func(pid int) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			return
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 4 || f[0][0] == 'Z' || f[0][0] == 'X' {
			return
		}
		if s, err := strconv.Atoi(string(f[3])); err == nil && s == sid {
			pids = append(pids, pid)
		}
	})
	return pids
}

// LockFree reports whether nobody holds an flock on path: a test whose
// processes all share one lock (taken once, inherited by fork) learns
// that every one of them is dead without a /proc listing, which can miss
// a process that forks and exits while it is read.
func LockFree(t testing.TB, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// Reap collects pid, an orphan re-parented to this (subreaper) test
// process, failing t if it is not dead within the bound.
func Reap(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if got == pid || err == unix.ECHILD {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("orphan %d never died", pid)
}

// GroupGone reports whether no process, zombies included, has pgid.
func GroupGone(pgid int) bool {
	return unix.Kill(-pgid, 0) == unix.ESRCH
}

// PidsIn parses every "<label> <pid>" line of out, failing t on a line
// whose pid is not a number.
func PidsIn(t testing.TB, out, label string) []int {
	t.Helper()
	var pids []int
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, label+" "); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// Warm reports whether pid is an interpreter a runtime started ahead of
// its run and no run took yet: its command line ends with the argument
// execute-code-warm (internal/proc's launch.go). Like the guard it is
// the runtime's own, not a script's, and it may carry a test's mark when
// the test set it after the runtime started.
func Warm(pid int) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasSuffix(cmdline, []byte("\x00execute-code-warm\x00"))
}

// Python is the first python3 on $PATH that is a real executable, not a
// version manager's shim script (one starting with "#!"); the tests need
// one, so none fails t.
func Python(t testing.TB) string {
	t.Helper()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "python3")
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		var magic [2]byte
		_, rerr := io.ReadFull(f, magic[:])
		f.Close()
		if rerr == nil && string(magic[:]) != "#!" {
			return p
		}
	}
	t.Fatal("no python3 executable on PATH")
	return ""
}

// NPMBin is the path of bin, a command of the npm package pkg that the
// tests drive as a real peer; `make peers` installs them from the lockfile
// in integration/testdata/npm. A missing one fails t, naming the package:
// a test that needs a real client or server never passes without it.
func NPMBin(t testing.TB, pkg, bin string) string {
	t.Helper()
	p := filepath.Join(moduleRoot(t), "integration", "testdata", "npm", "node_modules", ".bin", bin)
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("npm package %s is not installed (%s missing): run `make peers`", pkg, bin)
	}
	return p
}

// moduleRoot is the directory of the module's go.mod, found upwards from
// the test's working directory (its package's directory).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
