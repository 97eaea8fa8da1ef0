// Package sweep kills every process of a session, pass after pass over
// /proc: the host runs it at every interpreter's end. It imports only the
// standard library and golang.org/x/sys/unix. It is the runtime's own
// machinery, with no compatibility promise.
package sweep

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A session sweep kills every process of some sessions, however its
// members moved between process groups: a process can leave its
// session only by starting one of its own (setsid), and it can join one
// only by being forked from a member, so a session's members are exactly
// the descendants of its leader that never called setsid. The kernel
// lists no session's members, so a sweep reads /proc.
//
// /proc is no snapshot: a member may fork and exit between a pass
// listing it and reading it, and its child, younger than the listing
// but with a pid it has passed (the pid space wraps), is then seen by
// neither. Three things keep that from ending a sweep early: the listing
// is read a few entries at a time, each examined at once, so the window
// is short and a child with a higher pid is still listed in the same
// pass; a member seen as a zombie for the first time counts as seen,
// since it may have just forked; and once anything was seen, a sweep ends
// only after two passes in a row saw nothing new.

// SweepResult is what one sweep did.
type SweepResult struct {
	Passes int // full /proc passes
	Probes int // passes that probed only the pids allocated since the leader
	Killed int // processes sent SIGKILL
	// Complete is false when the bound ran out while members were still
	// found (a fork storm, or a member stuck in the kernel ignoring its
	// SIGKILL).
	Complete bool
}

// sweepPoll is how long a sweep waits between passes while the
// processes it killed are still dying: SIGKILL takes effect when the
// target next runs, which on a loaded machine can take milliseconds.
const sweepPoll = time.Millisecond

// minSweepPasses are made whatever the bound: on a machine so loaded
// that one pass outlasts the bound, a sweep still gets its confirming
// passes.
const minSweepPasses = 4

// dentsBuffer is how much of the /proc listing one getdents call reads:
// about 80 entries, examined before the next are listed.
const dentsBuffer = 2 << 10

// KillSession is KillSessions for the one session of a leader forked
// after forks0 forks had been counted (ForkCount, read before the fork):
// its members all have pids allocated after the leader's. While fewer
// forks than the pid space holds have happened since, those pids lie
// between the leader's and the last one allocated, and a pass probes just
// that range, pid by pid, instead of listing every process: the cost of
// the processes started meanwhile, not of all of them. Otherwise (forks0
// 0, a possible wrap of the pid space, a range past maxProbes) a pass
// lists /proc.
func KillSession(sid int, forks0 uint64, within time.Duration) SweepResult {
	return killSessions([]int{sid}, false, forks0, within)
}

func killSessions(ids []int, groups bool, forks0 uint64, within time.Duration) SweepResult {
	var res SweepResult
	if len(ids) == 0 {
		return res
	}
	if groups {
		for _, id := range ids {
			_ = unix.Kill(-id, unix.SIGKILL)
		}
	}
	s, err := newScanner()
	if err != nil {
		// No /proc: nothing can be found, and only the group kills above
		// were possible.
		return SweepResult{Complete: false}
	}
	if forks0 > 0 {
		s.ringSize = pidRing()
	}
	defer s.close()
	deadline := time.Now().Add(within)
	quiet, need := 0, 1
	for {
		live, killed, fresh, probed := s.probePass(ids, forks0)
		if !probed {
			live, killed, fresh = s.pass(ids, groups)
			res.Passes++
		} else {
			res.Probes++
		}
		res.Killed += killed
		if live == 0 && fresh == 0 {
			if quiet++; quiet >= need {
				res.Complete = true
				return res
			}
		} else {
			quiet, need = 0, 2
		}
		if res.Passes+res.Probes >= minSweepPasses && !time.Now().Before(deadline) {
			return res
		}
		if live > 0 && killed == 0 {
			// Only the dying are left: let them run to their end.
			time.Sleep(sweepPoll)
		}
	}
}

// scanner reads /proc with raw getdents and one stat read per process,
// reusing its buffers across passes.
type scanner struct {
	proc int // /proc, open
	self int
	dents,
	stat []byte
	name []byte
	// dying are the processes this sweep sent SIGKILL (pid to start
	// time): seen again, they are waited for, not counted as new.
	dying map[int]uint64
	// zombies are the members seen dead (pid to start time): only a new
	// one may have forked something a pass missed.
	zombies map[int]uint64
	// ringSize is how many pids the allocator cycles through (0: unknown,
	// so no pass probes).
	ringSize int
	small    []byte // /proc/loadavg and /proc/stat reads
}

func newScanner() (*scanner, error) {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &scanner{proc: fd, self: unix.Getpid(), dents: make([]byte, dentsBuffer), stat: make([]byte, 1024), name: make([]byte, 0, 32), dying: map[int]uint64{}, zombies: map[int]uint64{},
		small: make([]byte, 64<<10)}, nil
}

func (s *scanner) close() { unix.Close(s.proc) }

// pass lists /proc once, kills every live member it has not killed
// before, and reports the live members it saw (killed now, or dying of
// an earlier pass's kill), how many it killed, and how many members it
// saw as zombies for the first time.
func (s *scanner) pass(ids []int, groups bool) (live, killed, fresh int) {
	if _, err := unix.Seek(s.proc, 0, 0); err != nil {
		return 0, 0, 0
	}
	for {
		n, err := unix.Getdents(s.proc, s.dents)
		if err != nil || n <= 0 {
			return live, killed, fresh
		}
		for b := s.dents[:n]; len(b) >= 19; {
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				break
			}
			pid, ok := pidName(b[19:reclen])
			b = b[reclen:]
			if ok {
				s.examine(pid, ids, groups, &live, &killed, &fresh)
			}
		}
	}
}

// examine kills pid if it is a live member not killed before, and counts
// what it saw.
func (s *scanner) examine(pid int, ids []int, groups bool, live, killed, fresh *int) {
	if pid == s.self {
		return
	}
	st, ok := s.read(pid)
	if !ok || !member(st, ids, groups) {
		return
	}
	if st.zombie {
		// A leader's own zombie (it pins the id) is no news.
		if start, ok := s.zombies[pid]; !slices.Contains(ids, pid) && (!ok || start != st.start) {
			s.zombies[pid] = st.start
			*fresh++
		}
		return
	}
	*live++
	if start, ok := s.dying[pid]; ok && start == st.start {
		return // killed by an earlier pass, not dead yet
	}
	if s.kill(pid, st, ids, groups) {
		s.dying[pid] = st.start
		*killed++
	}
}

// maxProbes bounds a probing pass: past it, listing /proc is cheaper.
const maxProbes = 4096

// pidMin is where the allocator starts again after pid_max (the kernel's
// RESERVED_PIDS).
const pidMin = 300

// probePass probes every pid allocated after ids[0], the leader's, up to
// the last one allocated, following the allocator while members fork
// during the pass. It reports probed false, having done nothing, when it
// cannot vouch for that range: the pid space may have wrapped since the
// leader's fork (as many forks as it holds, less a margin), or the range
// is past maxProbes.
func (s *scanner) probePass(ids []int, forks0 uint64) (live, killed, fresh int, probed bool) {
	if forks0 == 0 || s.ringSize == 0 || len(ids) != 1 {
		return 0, 0, 0, false
	}
	forks, ok := s.forkCount()
	// Half the ring: whatever is allocated while this pass runs cannot
	// close the rest of it.
	if !ok || forks < forks0 || forks-forks0 >= uint64(s.ringSize/2) {
		return 0, 0, 0, false
	}
	last, ok := s.lastPid()
	if !ok {
		return 0, 0, 0, false
	}
	sid := ids[0]
	if s.distance(sid, last) > maxProbes {
		return 0, 0, 0, false
	}
	p, n := sid, 0
	for {
		for p != last {
			if p++; p >= pidMin+s.ringSize {
				p = pidMin
			}
			if n++; n > maxProbes {
				// A fork storm outran the probes: what was probed is
				// handled, and the caller counts this as a pass that saw
				// something, so another one follows.
				return live + 1, killed, fresh, true
			}
			s.examine(p, ids, false, &live, &killed, &fresh)
		}
		next, ok := s.lastPid()
		if !ok {
			return live + 1, killed, fresh, true
		}
		if next == last {
			return live, killed, fresh, true
		}
		last = next
	}
}

// distance is how many pids the allocator hands out after from until it
// hands out to.
func (s *scanner) distance(from, to int) int {
	if to >= from {
		return to - from
	}
	return (pidMin + s.ringSize - from) + (to - pidMin)
}

// lastPid is the pid the allocator handed out last, in this namespace:
// the last field of /proc/loadavg.
func (s *scanner) lastPid() (int, bool) {
	b, ok := s.readSmall("loadavg")
	if !ok {
		return 0, false
	}
	b = bytes.TrimRight(b, "\n")
	i := bytes.LastIndexByte(b, ' ')
	if i < 0 {
		return 0, false
	}
	return atoi(b[i+1:])
}

func (s *scanner) forkCount() (uint64, bool) {
	b, ok := s.readSmall("stat")
	if !ok {
		return 0, false
	}
	return parseForks(b)
}

// readSmall reads a /proc file whole (up to the buffer).
func (s *scanner) readSmall(name string) ([]byte, bool) {
	fd, err := unix.Openat(s.proc, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n := 0
	for n < len(s.small) {
		m, err := unix.Read(fd, s.small[n:])
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	return s.small[:n], n > 0
}

// ForkCount is the number of forks since boot (the "processes" line of
// /proc/stat): every pid allocation of every namespace, threads
// included. ok is false when it cannot be read.
func ForkCount() (uint64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseForks(b)
}

func parseForks(b []byte) (uint64, bool) {
	const key = "\nprocesses "
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		b = b[:j]
	}
	v, ok := atoi(b)
	return uint64(v), ok && v > 0
}

// pidRing is how many pids the allocator cycles through after its first
// wrap, from pid_max; 0 when unknown.
func pidRing() int {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0
	}
	max, ok := atoi(bytes.TrimSpace(b))
	if !ok || max <= pidMin+maxProbes {
		return 0
	}
	return max - pidMin
}

// kill signals pid through a pidfd, after checking through that pidfd's
// process that it is still the member the listing showed.
func (s *scanner) kill(pid int, seen procStat, ids []int, groups bool) bool {
	pfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		// A kernel before 5.3: the window between the stat read and the
		// kill is microseconds, far shorter than a cycle of the pid space.
		return unix.Kill(pid, unix.SIGKILL) == nil
	}
	if err != nil {
		return false // gone already
	}
	defer unix.Close(pfd)
	// The pidfd names one process for good; if it is the one whose stat
	// was read (same start time), it is the member.
	now, ok := s.read(pid)
	if !ok || now.start != seen.start || !member(now, ids, groups) {
		return false
	}
	return unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0) == nil
}

func member(st procStat, ids []int, groups bool) bool {
	for _, id := range ids {
		if st.session == id || (groups && st.pgrp == id) {
			return true
		}
	}
	return false
}

// pidName parses a NUL-terminated /proc entry name that is a pid.
func pidName(name []byte) (int, bool) {
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if len(name) == 0 || len(name) > 10 {
		return 0, false
	}
	pid := 0
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, pid > 0
}

type procStat struct {
	pgrp, session int
	start         uint64 // clock ticks after boot: with the pid, names one process
	zombie        bool
}

// read reads /proc/<pid>/stat.
func (s *scanner) read(pid int) (procStat, bool) {
	s.name = appendPid(s.name[:0], pid)
	s.name = append(s.name, "/stat"...)
	fd, err := unix.Openat(s.proc, string(s.name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, false
	}
	n, err := unix.Read(fd, s.stat)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return procStat{}, false
	}
	return parseStat(s.stat[:n])
}

func appendPid(b []byte, pid int) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + pid%10)
		if pid /= 10; pid == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// parseStat reads state (field 3), pgrp (5), session (6) and starttime
// (22) of proc(5)'s stat line. The command name in parentheses may hold
// anything, so the fields are counted from its last ')'.
func parseStat(b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	var st procStat
	b = b[i+1:]
	for field := 0; field <= 19; field++ {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		end := bytes.IndexByte(b, ' ')
		if end < 0 {
			end = len(b)
		}
		f := b[:end]
		b = b[end:]
		if len(f) == 0 {
			return procStat{}, false
		}
		var ok bool
		switch field {
		case 0:
			st.zombie = f[0] == 'Z' || f[0] == 'X'
			ok = true
		case 2:
			st.pgrp, ok = atoi(f)
		case 3:
			st.session, ok = atoi(f)
		case 19:
			var v int
			v, ok = atoi(bytes.TrimRight(f, "\n"))
			st.start = uint64(v)
		default:
			ok = true
		}
		if !ok {
			return procStat{}, false
		}
	}
	return st, true
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}
