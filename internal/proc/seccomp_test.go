package proc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompVM runs the sandbox's filter, as installed, on syscalls made up
// by the test: x/net/bpf's VM reads big-endian words, so each field of
// seccomp_data is laid out big-endian at its offset, which gives the VM
// the values the kernel reads in native order.
func seccompVM(t *testing.T) func(arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	raw, err := seccompFilter()
	require.NoError(t, err)
	require.Zero(t, len(raw)%8)
	var prog []bpf.Instruction
	for i := 0; i < len(raw); i += 8 {
		prog = append(prog, bpf.RawInstruction{
			Op: binary.NativeEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.NativeEndian.Uint32(raw[i+4:]),
		}.Disassemble())
	}
	vm, err := bpf.NewVM(prog)
	require.NoError(t, err)
	return func(arch, nr uint32, args ...uint64) uint32 {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[seccompNR:], nr)
		binary.BigEndian.PutUint32(data[seccompArch:], arch)
		for i, a := range args {
			binary.BigEndian.PutUint32(data[seccompArg0+8*i:], uint32(a))
			binary.BigEndian.PutUint32(data[seccompArg0+8*i+4:], uint32(a>>32))
		}
		out, err := vm.Run(data)
		require.NoError(t, err)
		return uint32(out)
	}
}

func errnoOf(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// Each rule of the filter, from the side a script would try it.
func TestTheSeccompFilterRefusesWhatLandlockDoesNotSee(t *testing.T) {
	run := seccompVM(t)
	arch := uint32(seccompAuditArch)
	const allow = unix.SECCOMP_RET_ALLOW
	cases := []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"socket AF_INET", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_DGRAM}, errnoOf(unix.EACCES)},
		{"socket AF_UNIX", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, errnoOf(unix.EACCES)},
		{"socketpair stays", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
		{"io_uring", unix.SYS_IO_URING_SETUP, nil, errnoOf(unix.EACCES)},
		{"chmod", unix.SYS_CHMOD, nil, errnoOf(unix.EPERM)},
		{"fchmodat2", unix.SYS_FCHMODAT2, nil, errnoOf(unix.EPERM)},
		{"fchownat", unix.SYS_FCHOWNAT, nil, errnoOf(unix.EPERM)},
		{"setxattr", unix.SYS_SETXATTR, nil, errnoOf(unix.EPERM)},
		{"utimensat", unix.SYS_UTIMENSAT, nil, errnoOf(unix.EPERM)},
		{"ptrace", unix.SYS_PTRACE, nil, errnoOf(unix.EPERM)},
		{"setsid", unix.SYS_SETSID, nil, errnoOf(unix.EPERM)},
		{"setpgid stays", unix.SYS_SETPGID, nil, allow},
		{"unshare", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWUSER}, errnoOf(unix.EPERM)},
		{"setrlimit", unix.SYS_SETRLIMIT, nil, errnoOf(unix.EACCES)},
		{"prlimit64 set", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_CPU, 0x7ffd_0000_1000, 0}, errnoOf(unix.EACCES)},
		{"prlimit64 set, pointer above 4 GiB only", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_CPU, 0x7ffd_0000_0000, 0}, errnoOf(unix.EACCES)},
		{"prlimit64 get stays", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_CPU, 0, 0x7ffd_0000_1000}, allow},
		{"clone for a thread stays", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, allow},
		{"clone for a fork stays", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone into a user namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, errnoOf(unix.EPERM)},
		{"clone into a network namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, errnoOf(unix.EPERM)},
		{"clone3 falls back", unix.SYS_CLONE3, nil, errnoOf(unix.ENOSYS)},
		{"read stays", unix.SYS_READ, nil, allow},
		{"openat stays", unix.SYS_OPENAT, nil, allow},
		{"kill stays (Landlock scopes it)", unix.SYS_KILL, nil, allow},
		{"x32 numbering", seccompX32Bit | unix.SYS_READ, nil, errnoOf(unix.EACCES)},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, run(arch, c.nr, c.args...), c.name)
	}
	assert.Equal(t, uint32(unix.SECCOMP_RET_KILL_PROCESS), run(unix.AUDIT_ARCH_I386, unix.SYS_READ), "another architecture's numbers")
}

// The bootstrap's status line is the only word a child has on whether it
// confined itself: whatever bytes it sends, the host either reads all of
// the plan or an error wrapping ErrSandbox.
func FuzzSandboxStatus(f *testing.F) {
	f.Add([]byte("ok 7 1 1 1 1\n"))
	f.Add([]byte("error kernel Landlock ABI 5, need at least 6\n"))
	f.Add([]byte("ok 7 1 1 1\n"))
	f.Add([]byte("ok 7 1 1 1 1"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := readSandboxStatus(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			require.ErrorIs(t, err, ErrSandbox)
			assert.Equal(t, Protections{}, got)
			return
		}
		require.True(t, bytes.HasPrefix(b, []byte("ok ")), "%q", b)
	})
}
