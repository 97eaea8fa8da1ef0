package proc

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data, which the filter reads in native
// (little-endian) words: the syscall number, the audit architecture, and
// the six arguments, each 64 bits wide.
const (
	seccompNR   = 0
	seccompArch = 4
	seccompArg0 = 16
)

// seccompRule says what the filter does with one syscall.
type seccompRule struct {
	nr    uint32
	errno unix.Errno
}

// cloneNamespaces are the clone(2) flags that make a namespace. A script
// that made a user namespace would hold every capability inside it, and
// what Landlock and the dropped capabilities refuse outside it could then
// be asked again of a world the script owns.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// seccompFilter is the classic BPF program the sandbox installs after
// Landlock. Landlock (up to ABI 8) confines TCP only, so every socket(2)
// is refused here: UDP, MPTCP, raw and packet sockets, netlink, and Unix
// sockets, pathname or abstract; socketpair(2) stays, which asyncio and
// multiprocessing need and which reaches nothing outside. It also refuses
// what Landlock does not see: changing a file's mode, owner, times or
// extended attributes (a capability-less root still owns most of the
// system's files), io_uring (whose operations bypass this filter), new
// namespaces, ptrace and cross-process memory access, setting any
// rlimit, which python could otherwise raise back to its hard limit, and
// setsid, so that no descendant leaves the session the host sweeps at the
// end of every run and kernel.
// Another architecture's syscall numbering (a 32-bit python) kills the
// process: its numbers would mean other syscalls.
func seccompFilter() ([]byte, error) {
	if len(seccompDenied) == 0 {
		return nil, fmt.Errorf("%w: no seccomp filter for this architecture", ErrSandbox)
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompAuditArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		bpf.LoadAbsolute{Off: seccompNR, Size: 4},
	}
	if seccompX32Bit != 0 {
		// The x32 ABI reaches the same kernel entry points under numbers
		// with this bit set.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: seccompX32Bit, SkipFalse: 1},
			errnoRet(unix.EACCES))
	}
	for _, r := range seccompDenied {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: 1}, errnoRet(r.errno))
	}
	// clone3 passes its flags in memory the filter cannot read: ENOSYS
	// makes the C library fall back to clone, whose flags it can.
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1}, errnoRet(unix.ENOSYS))
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 4},
		bpf.LoadAbsolute{Off: seccompArg0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaces, SkipFalse: 1},
		errnoRet(unix.EPERM),
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	)
	// prlimit64(pid, resource, new, old): reading a limit (new == NULL)
	// stays allowed, setting one is refused. EACCES, not EPERM: python's
	// resource module reports EPERM as a ValueError about raising the
	// hard limit, which would misstate a refusal of every change.
	newLimit := uint32(seccompArg0 + 2*8)
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PRLIMIT64, SkipFalse: 6},
		bpf.LoadAbsolute{Off: newLimit, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: newLimit + 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		errnoRet(unix.EACCES),
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("%w: assemble seccomp filter: %w", ErrSandbox, err)
	}
	// struct sock_filter, in the host's byte order: code, jt, jf, k.
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.NativeEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

func errnoRet(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
}
