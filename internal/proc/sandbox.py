# Run by the bootstrap, after the spec above, when the host asks for the
# sandbox: confine this process with Landlock and seccomp, drop every
# capability, and tell the host on the handshake (_fd) what is in force.
# Any failure is reported and ends the process before the program runs.
import os as _os


def _confine():
    import ctypes
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    prctl = libc.prctl
    prctl.restype = ctypes.c_int
    ulong = ctypes.c_ulong

    def sys(nr, *args):
        return syscall(ctypes.c_long(nr), *args)

    def ctl(option, arg2=0, arg3=0):
        return prctl(ctypes.c_int(option), ulong(arg2), ulong(arg3), ulong(0), ulong(0))

    def failed(step):
        e = ctypes.get_errno()
        return RuntimeError("%s: %s (errno %d)" % (step, _os.strerror(e), e))

    # Landlock and no_new_privs bind the calling thread only: a thread a
    # site or .pth hook started would stay unconfined.
    threads = len(_os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError("%d threads run before the sandbox (a site or .pth hook started them), "
                           "and it confines only its own" % threads)

    create_ruleset, add_rule, restrict_self = 444, 445, 446
    abi = sys(create_ruleset, None, ulong(0), ulong(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 0:
        e = ctypes.get_errno()
        raise RuntimeError("Landlock is unavailable in this kernel: %s (errno %d)" % (_os.strerror(e), e))
    if abi < _MIN_ABI:
        raise RuntimeError("kernel Landlock ABI %d, need at least %d" % (abi, _MIN_ABI))
    if abi < _ABI:
        raise RuntimeError("kernel Landlock ABI %d, the rules were made for %d" % (abi, _ABI))
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", _HANDLED_FS, _HANDLED_NET, _SCOPED), 24)
    ruleset = sys(create_ruleset, attr, ulong(24), ulong(0))
    if ruleset < 0:
        raise failed("landlock_create_ruleset")
    try:
        for path, access, optional in _RULES:
            try:
                fd = _os.open(path, _os.O_PATH | _os.O_CLOEXEC)
            except FileNotFoundError:
                if optional:
                    continue
                raise RuntimeError("rule for %s: no such file or directory" % _os.fsdecode(path))
            except OSError as e:
                raise RuntimeError("rule for %s: %s" % (_os.fsdecode(path), e.strerror))
            try:
                beneath = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
                if sys(add_rule, ulong(ruleset), ulong(1), beneath, ulong(0)) != 0:  # PATH_BENEATH
                    raise failed("landlock rule for %s" % _os.fsdecode(path))
            finally:
                _os.close(fd)

        _drop_capabilities(ctypes, struct, libc, ctl, failed)
        if ctl(38, 1) != 0:  # PR_SET_NO_NEW_PRIVS
            raise failed("no_new_privs")
        if sys(restrict_self, ulong(ruleset), ulong(0)) != 0:
            raise failed("landlock_restrict_self")
    finally:
        _os.close(ruleset)

    code = ctypes.create_string_buffer(_FILTER, len(_FILTER))
    prog = ctypes.create_string_buffer(struct.pack("@HP", len(_FILTER) // 8, ctypes.addressof(code)))
    if ctl(22, 2, ctypes.addressof(prog)) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise failed("seccomp filter")
    return abi


def _drop_capabilities(ctypes, struct, libc, ctl, failed):
    # Root with no capability at all still owns most of the system's
    # files; with them it would also pass every permission check Landlock
    # does not make. The bounding set goes first (which needs CAP_SETPCAP:
    # a process without privileges has nothing there to lose), then the
    # ambient set, then every set of this process; no_new_privs, set next,
    # keeps an exec of a setuid or file-capability binary from giving any
    # back.
    for cap in range(64):
        if ctl(24, cap) != 0:  # PR_CAPBSET_DROP
            e = ctypes.get_errno()
            if e == 22:  # EINVAL: past the last capability
                break
            if e == 1 and cap == 0:  # EPERM: no CAP_SETPCAP
                break
            raise failed("drop capability %d from the bounding set" % cap)
    if ctl(47, 4) != 0:  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
        raise failed("clear the ambient capabilities")
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)  # version 3, this process
    data = ctypes.create_string_buffer(24)
    if libc.capset(header, data) != 0:
        raise failed("capset")
    if libc.capget(header, data) != 0:
        raise failed("capget")
    if any(data.raw):
        raise RuntimeError("capabilities remain after capset")


try:
    _abi = _confine()
except BaseException as _e:
    _msg = (str(_e) or type(_e).__name__).replace("\n", " ")
    _os.write(_fd, b"error " + _msg.encode("utf-8", "replace") + b"\n")
    _os._exit(124)
_os.write(_fd, b"ok %d 1 1 1 1\n" % _abi)
