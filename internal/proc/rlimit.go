package proc

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The Spawner starts python3 itself, never a copy of the host binary, so
// no initialiser of the host's packages runs in a child. Go has no
// pre-exec hook, so what a launcher would have done before the exec is
// split in two: the host sets the rlimits on the new pid with prlimit(2)
// while python waits on a handshake pipe, and Bootstrap, python's first
// statement, does the rest once released (SIGINT, inherited descriptors,
// the parent check). docs/decisions.md records the choice.
const (
	// handshakeEnv tells Bootstrap "<fd>:<host pid>"; Bootstrap removes it
	// before any user code runs.
	handshakeEnv = "EXECUTE_CODE_HANDSHAKE"
	// guardEnv marks the guard's environment, so a host's leftovers can be
	// told from its guard.
	guardEnv = "EXECUTE_CODE_GUARD"
	arenaEnv = "MALLOC_ARENA_MAX"
)

//go:embed bootstrap.py
var bootstrapSource string

// Bootstrap is one line of python that must be the first statement of
// every program the Spawner starts with Args (a -c program, an MCP
// server's launcher), and that a program file for Command.Main may carry
// too (the runner of a session kernel, the helper module a per-call
// script imports): it blocks until the host has applied the Limits, and
// it does nothing in a program not started by a Spawner, or whose
// interpreter's bootstrap already ran (a launched one's: see
// Command.Main), at the cost of one lookup. It runs in a namespace of its
// own and binds no name in the program's.
var Bootstrap = "exec(compile(" + pyQuote(bootstrapSource) + `, "<execute-code bootstrap>", "exec"), {}) if ` +
	pyQuote(handshakeEnv) + ` in __import__("os").environ else None` + "\n"

// pyQuote renders s as a JSON string, which python reads as the same
// string literal.
func pyQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return string(b)
}

// environ is env without the runtime's own variables, plus
// MALLOC_ARENA_MAX=2 when capArenas and env does not choose a value: under
// RLIMIT_AS glibc's 64 MiB per-thread arenas leave room for only a dozen
// threads.
func environ(env []string, capArenas bool) []string {
	out := make([]string, 0, len(env)+2)
	hasArena := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case handshakeEnv, guardEnv:
			continue
		case arenaEnv:
			hasArena = true
		}
		out = append(out, kv)
	}
	if capArenas && !hasArena {
		out = append(out, arenaEnv+"=2")
	}
	return out
}

func handshakeValue(fd, host int) string {
	return handshakeEnv + "=" + strconv.Itoa(fd) + ":" + strconv.Itoa(host)
}

const rlimInfinity = ^uint64(0)

// applyLimits sets lim on the process pid, which has not run any code of
// its own yet. A limit above the inherited hard limit is lowered to it:
// only CAP_SYS_RESOURCE could raise it, and a start must not fail where
// the host's operator has been stricter. The error names the step.
func applyLimits(pid int, lim Limits) error {
	steps := []struct {
		resource int
		step     string
		want     uint64
	}{
		{unix.RLIMIT_CPU, "rlimit-cpu", uint64(max(lim.CPUSeconds, 0))},
		{unix.RLIMIT_FSIZE, "rlimit-fsize", mib(lim.FsizeMB)},
		{unix.RLIMIT_NPROC, "rlimit-nproc", uint64(max(lim.NProc, 0))},
		{unix.RLIMIT_AS, "rlimit-as", mib(lim.MemoryMB)},
	}
	for _, s := range steps {
		if s.want == 0 {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, s.resource, nil, &cur); err != nil {
			return fmt.Errorf("%s: %w", s.step, err)
		}
		clamp := func(v uint64) uint64 {
			if cur.Max != rlimInfinity && v > cur.Max {
				return cur.Max
			}
			return v
		}
		next := unix.Rlimit{Cur: clamp(s.want), Max: clamp(s.want)}
		if s.resource == unix.RLIMIT_CPU {
			// One second of grace: SIGXCPU first, SIGKILL if it is caught.
			next.Max = clamp(s.want + 1)
			if lim.CPUHardUnlimited {
				next.Max = cur.Max
			}
		}
		if err := unix.Prlimit(pid, s.resource, &next, nil); err != nil {
			return fmt.Errorf("%s: %w", s.step, err)
		}
	}
	return nil
}

func mib(n int) uint64 {
	if n <= 0 {
		return 0
	}
	return uint64(n) << 20
}
