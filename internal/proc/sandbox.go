package proc

import (
	"bufio"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSandbox wraps every reason an interpreter could not be confined:
// the kernel lacks what the rules need, a rule could not be made, or the
// bootstrap could not apply them. The interpreter it concerns has run no
// code of its caller's.
var ErrSandbox = errors.New("execute_code sandbox unavailable")

// MinLandlockABI is the lowest Landlock ABI the sandbox accepts. Version
// 4 brings the TCP rules and version 6 the scopes that keep a script from
// signalling a process outside its own domain (the host, the guard,
// another kernel) and from reaching an abstract Unix socket; seccomp
// cannot stand in for the signal scope without also forbidding a script
// to signal its own children, so below 6 the sandbox fails closed.
const MinLandlockABI = 6

// Landlock access rights (include/uapi/linux/landlock.h), by the ABI that
// introduced them.
const (
	llExecute    = unix.LANDLOCK_ACCESS_FS_EXECUTE
	llWriteFile  = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	llReadFile   = unix.LANDLOCK_ACCESS_FS_READ_FILE
	llReadDir    = unix.LANDLOCK_ACCESS_FS_READ_DIR
	llRemoveDir  = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	llRemoveFile = unix.LANDLOCK_ACCESS_FS_REMOVE_FILE
	llMakeChar   = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR
	llMakeDir    = unix.LANDLOCK_ACCESS_FS_MAKE_DIR
	llMakeReg    = unix.LANDLOCK_ACCESS_FS_MAKE_REG
	llMakeSock   = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
	llMakeFifo   = unix.LANDLOCK_ACCESS_FS_MAKE_FIFO
	llMakeBlock  = unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	llMakeSym    = unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llRefer      = unix.LANDLOCK_ACCESS_FS_REFER    // ABI 2
	llTruncate   = unix.LANDLOCK_ACCESS_FS_TRUNCATE // ABI 3
	llIoctlDev   = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	llFSv1 = llExecute | llWriteFile | llReadFile | llReadDir | llRemoveDir | llRemoveFile |
		llMakeChar | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym
)

// handledFS is every filesystem right the kernel of abi knows: a right
// not handled is a right not restricted.
func handledFS(abi int) uint64 {
	m := uint64(llFSv1)
	if abi >= 2 {
		m |= llRefer
	}
	if abi >= 3 {
		m |= llTruncate
	}
	if abi >= 5 {
		m |= llIoctlDev
	}
	return m
}

// What each kind of rule allows. A workspace may be read, written and
// renamed across (refer), but nothing in it may be executed, and no
// device node made in it; the interpreter and its ELF interpreter are the
// only files that may be executed, so a script's subprocess can only be
// python.
const (
	accessReadDir   = llReadFile | llReadDir
	accessReadFile  = llReadFile
	accessExecFile  = llReadFile | llExecute
	accessWriteDir  = llReadFile | llReadDir | llWriteFile | llTruncate | llRemoveDir | llRemoveFile | llMakeDir | llMakeReg | llMakeSym | llMakeFifo | llRefer
	accessWriteFile = llReadFile | llWriteFile | llTruncate
)

// CheckSeccomp says whether this build has the sandbox's seccomp filter
// for the host's architecture.
func CheckSeccomp() error {
	_, err := seccompFilter()
	return err
}

// LandlockABI is the running kernel's Landlock ABI version, 0 when
// Landlock is not built in, disabled at boot or blocked (a container's
// seccomp profile): landlock_create_ruleset(NULL, 0, VERSION) needs no
// privilege and no child.
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Protections are what a confined interpreter runs under: the Landlock
// ABI its rules were made for, whether its filesystem is confined to its
// rules, whether it is cut off from the network, whether it is scoped
// away from signalling processes outside its domain, and whether the
// seccomp filter is installed. The zero value is an unconfined process.
type Protections struct {
	ABI     int
	FS      bool
	Net     bool
	Scoped  bool
	Seccomp bool
}

// Planned is what a Sandbox for a kernel of abi applies, all or nothing:
// below MinLandlockABI nothing can be applied, so it is the zero value.
func Planned(abi int) Protections {
	if abi < MinLandlockABI {
		return Protections{}
	}
	return Protections{ABI: abi, FS: true, Net: true, Scoped: true, Seccomp: true}
}

// Sandbox confines one interpreter. The interpreter's own Bootstrap
// applies it before any code of the program runs, from the single thread
// python has at that point: Landlock restricts only its caller and the
// caller's future children, so it cannot be applied from outside. If any
// step fails, Start fails, naming the step, and the program never runs.
type Sandbox struct {
	// ABI is the Landlock ABI the rules are made for, normally
	// LandlockABI(); the bootstrap refuses a kernel below it or below
	// MinABI.
	ABI int
	// MinABI is the lowest kernel ABI the bootstrap accepts; 0 means
	// MinLandlockABI.
	MinABI int
	// Read are files and directories python may read (a directory with
	// everything below it); Exec files it may also execute; Write
	// directories it may read, write, and create and remove entries in;
	// WriteFiles files it may read and write (/dev/null). Every path must
	// exist when the interpreter starts, except Optional ones.
	Read, Exec, Write, WriteFiles []string
	// Optional are further read-only entries that may be missing (locale
	// data, time zones).
	Optional []string
	// Home becomes HOME, and Tmp TMPDIR; both should lie in a Write
	// directory.
	Home, Tmp string
}

func (s *Sandbox) minABI() int {
	if s.MinABI > 0 {
		return s.MinABI
	}
	return MinLandlockABI
}

// env is python's environment under the sandbox: its home and temporary
// directory are its workspace's, no user site directory joins sys.path
// (the real one is unreadable, and one made in the workspace would be
// the script's own code), and python writes no bytecode caches into
// directories it may not write. /etc/passwd is out of reach, so USER is
// set when the environment names no user (getpass reads it first).
func (s *Sandbox) env(env []string) []string { return s.envWith(env, s.Home, s.Tmp) }

// startEnv is the environment an interpreter to be confined starts with
// before its run is known (a warm one, and so every one: see
// Command.Main): env's own HOME where env would put the sandbox's, and no
// TMPDIR; the launcher sets both for the run before the program starts.
// site derives the user base from HOME at start-up, and the launcher has
// it derive it again.
func (s *Sandbox) startEnv(env []string) []string {
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
			break
		}
	}
	return s.envWith(env, home, "")
}

func (s *Sandbox) envWith(env []string, home, tmp string) []string {
	drop := map[string]bool{"HOME": true, "TMPDIR": true, "PYTHONNOUSERSITE": true, "PYTHONDONTWRITEBYTECODE": true}
	out := make([]string, 0, len(env)+5)
	named := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "USER" || k == "LOGNAME" {
			named = true
		}
		if !drop[k] {
			out = append(out, kv)
		}
	}
	out = append(out, "PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1")
	if u, err := user.Current(); err == nil && !named {
		out = append(out, "USER="+u.Username)
	}
	if home != "" {
		out = append(out, "HOME="+home)
	}
	if tmp != "" {
		out = append(out, "TMPDIR="+tmp)
	}
	return out
}

//go:embed sandbox.py
var sandboxSource string

// sandboxRule is one Landlock rule: a path and what it allows beneath it.
type sandboxRule struct {
	path     string
	access   uint64
	optional bool
}

// rules are the sandbox's Landlock rules, each path's rights fitted to
// what it is: directory rights on a regular file make the kernel refuse
// the rule. A required path that is gone fails the start here, before the
// child is asked.
func (s *Sandbox) rules() ([]sandboxRule, error) {
	var out []sandboxRule
	steps := []struct {
		paths     []string
		dir, file uint64
		optional  bool
	}{
		{s.Read, accessReadDir, accessReadFile, false},
		{s.Optional, accessReadDir, accessReadFile, true},
		{s.Exec, 0, accessExecFile, false},
		{s.Write, accessWriteDir, accessWriteFile, false},
		{s.WriteFiles, 0, accessWriteFile, false},
	}
	for _, st := range steps {
		for _, p := range st.paths {
			fi, err := os.Stat(p)
			switch {
			case err != nil && st.optional:
				continue
			case err != nil:
				return nil, fmt.Errorf("%w: rule for %s: %w", ErrSandbox, p, err)
			case fi.IsDir() && st.dir == 0:
				return nil, fmt.Errorf("%w: rule for %s: a directory where a file is needed", ErrSandbox, p)
			case fi.IsDir():
				out = append(out, sandboxRule{path: p, access: st.dir, optional: st.optional})
			default:
				out = append(out, sandboxRule{path: p, access: st.file, optional: st.optional})
			}
		}
	}
	return out, nil
}

// payload is the program the bootstrap runs to confine itself: the spec
// as python literals, then sandbox.py. Paths travel as hex of their
// bytes, so no byte of a path can end a literal.
//
// The ABI is checked by the bootstrap, against the kernel python runs on.
func (s *Sandbox) payload() ([]byte, error) {
	filter, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	rules, err := s.rules()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("_MIN_ABI = " + strconv.Itoa(s.minABI()) + "\n")
	b.WriteString("_ABI = " + strconv.Itoa(s.ABI) + "\n")
	b.WriteString("_HANDLED_FS = " + strconv.FormatUint(handledFS(s.ABI), 10) + "\n")
	b.WriteString("_HANDLED_NET = " + strconv.Itoa(unix.LANDLOCK_ACCESS_NET_BIND_TCP|unix.LANDLOCK_ACCESS_NET_CONNECT_TCP) + "\n")
	b.WriteString("_SCOPED = " + strconv.Itoa(unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET|unix.LANDLOCK_SCOPE_SIGNAL) + "\n")
	b.WriteString("_RULES = (\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "    (bytes.fromhex(%q), %d, %s),\n", hex.EncodeToString([]byte(r.path)), r.access&handledFS(s.ABI), pyBool(r.optional))
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "_FILTER = bytes.fromhex(%q)\n", hex.EncodeToString(filter))
	b.WriteString(sandboxSource)
	return []byte(b.String()), nil
}

func pyBool(v bool) string {
	if v {
		return "True"
	}
	return "False"
}

// readSandboxStatus reads the bootstrap's one status line: "ok ABI FS NET
// SCOPED SECCOMP" (each flag 0 or 1), or "error MESSAGE". Anything else,
// or the end of the stream first, means the child did not confine itself.
func readSandboxStatus(r *bufio.Reader) (Protections, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if line == "" {
			return Protections{}, fmt.Errorf("%w: the interpreter ended before it confined itself: %w", ErrSandbox, err)
		}
		return Protections{}, fmt.Errorf("%w: unfinished status %q", ErrSandbox, line)
	}
	line = strings.TrimSuffix(line, "\n")
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return Protections{}, fmt.Errorf("%w: %s", ErrSandbox, msg)
	}
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "ok" {
		return Protections{}, fmt.Errorf("%w: bad status %q", ErrSandbox, line)
	}
	abi, err := strconv.Atoi(f[1])
	if err != nil {
		return Protections{}, fmt.Errorf("%w: bad status %q", ErrSandbox, line)
	}
	flag := func(s string) bool { return s == "1" }
	return Protections{ABI: abi, FS: flag(f[2]), Net: flag(f[3]), Scoped: flag(f[4]), Seccomp: flag(f[5])}, nil
}
