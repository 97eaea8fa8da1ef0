// Package proctest finds processes for tests that must prove none is left
// behind: by pid, by a marker variable in their environment (which
// survives whatever became of their parent and process group), and by
// waiting for them to go. Zombies count as gone: they run nothing and
// their reaper may be a process the test does not control.
//
// It reads /proc only; it is imported by test files and never by the
// runtime.
package proctest

import (
	"bytes"
	"os"
	"strconv"
	"time"
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
	entries, _ := os.ReadDir("/proc")
	needle := []byte(name + "=" + value)
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() || !Alive(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + ent.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, needle) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
