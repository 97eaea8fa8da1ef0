package proc

import "golang.org/x/sys/unix"

const (
	seccompAuditArch = unix.AUDIT_ARCH_X86_64
	seccompX32Bit    = 0x40000000
)

// seccompDenied are the syscalls the sandbox's filter refuses outright,
// with the errno python turns into PermissionError.
var seccompDenied = []seccompRule{
	{unix.SYS_SOCKET, unix.EACCES},
	{unix.SYS_IO_URING_SETUP, unix.EACCES},
	{unix.SYS_SETRLIMIT, unix.EACCES},
	{unix.SYS_PTRACE, unix.EPERM},
	{unix.SYS_PROCESS_VM_READV, unix.EPERM},
	{unix.SYS_PROCESS_VM_WRITEV, unix.EPERM},
	{unix.SYS_PIDFD_GETFD, unix.EPERM},
	{unix.SYS_SETSID, unix.EPERM},
	{unix.SYS_UNSHARE, unix.EPERM},
	{unix.SYS_SETNS, unix.EPERM},
	{unix.SYS_CHMOD, unix.EPERM},
	{unix.SYS_FCHMOD, unix.EPERM},
	{unix.SYS_FCHMODAT, unix.EPERM},
	{unix.SYS_FCHMODAT2, unix.EPERM},
	{unix.SYS_CHOWN, unix.EPERM},
	{unix.SYS_FCHOWN, unix.EPERM},
	{unix.SYS_LCHOWN, unix.EPERM},
	{unix.SYS_FCHOWNAT, unix.EPERM},
	{unix.SYS_SETXATTR, unix.EPERM},
	{unix.SYS_LSETXATTR, unix.EPERM},
	{unix.SYS_FSETXATTR, unix.EPERM},
	{unix.SYS_SETXATTRAT, unix.EPERM},
	{unix.SYS_REMOVEXATTR, unix.EPERM},
	{unix.SYS_LREMOVEXATTR, unix.EPERM},
	{unix.SYS_FREMOVEXATTR, unix.EPERM},
	{unix.SYS_REMOVEXATTRAT, unix.EPERM},
	{unix.SYS_UTIME, unix.EPERM},
	{unix.SYS_UTIMES, unix.EPERM},
	{unix.SYS_FUTIMESAT, unix.EPERM},
	{unix.SYS_UTIMENSAT, unix.EPERM},
}
