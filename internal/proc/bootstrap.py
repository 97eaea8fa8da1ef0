# The first act of every python3 the Spawner starts, before any user code:
# wait until the host has set the rlimits, then finish the set-up a
# pre-exec hook would have done, and confine this process when the host
# asks for the sandbox. An interpreter started for a program file gets
# the launcher first ("L"), which waits for its run and places the run's
# descriptors; the run's program starts once everything here is done.
# Without the variable (a program run by hand, or the program of a
# launched interpreter, whose bootstrap already ran) it does nothing.
import os as _os
_v = _os.environ.pop("EXECUTE_CODE_HANDSHAKE", None)
if _v is not None:
    _fd, _host = (int(_x) for _x in _v.split(":"))

    def _take(n):
        b = b""
        while len(b) < n:
            c = _os.read(_fd, n - len(b))
            if not c:
                _os._exit(125)
            b += c
        return b

    _go = _os.read(_fd, 1)
    _launch = None
    if _go in (b"L", b"C"):
        import marshal as _marshal
        _src = _take(int(_take(8), 16))
        if _go == b"L":
            # The launcher's source: compiled here, and handed back so the
            # host can give the next interpreter of this binary the code.
            _code = compile(_src, "<execute-code launcher>", "exec")
            _b = _marshal.dumps(_code)
            _b = b"m%08x" % len(_b) + _b
            while _b:
                _b = _b[_os.write(_fd, _b):]
        else:
            _code = _marshal.loads(_src)
            if type(_code) is not type(_take.__code__) or _code.co_filename != "<execute-code launcher>":
                _os._exit(125)
        del _src
        _launch = {"_fd": _fd, "_take": _take}
        exec(_code, _launch)
        del _code
        _fd = _launch["_fd"]
        _go = _os.read(_fd, 1)
    if _go not in (b"1", b"S"):
        # The host failed a step and kills this process; never run on.
        _os._exit(125)
    import _signal
    # What python installs itself when it starts with SIGINT at default:
    # a host that ignores SIGINT must not leave the script deaf to it.
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    # Descriptors the host inherited without close-on-exec (a shell's, a
    # service manager's) are not the script's: only 0, 1, 2 and the files
    # it was given, all below the handshake's, stay open.
    for _n in _os.listdir("/proc/self/fd"):
        if int(_n) > _fd:
            try:
                _os.close(int(_n))
            except OSError:
                pass
    if _os.getppid() != _host:
        _os.write(2, b"execute-code bootstrap: parent-check failed\n")
        _os._exit(125)
    if _go == b"S":
        # The sandbox program follows, its length in 8 hex digits.
        exec(compile(_take(int(_take(8), 16)), "<execute-code sandbox>", "exec"), {"_fd": _fd})
    elif _launch is not None:
        # A launched interpreter always answers: the host hands out no
        # interpreter that did not get this far.
        _os.write(_fd, b"ok 0 0 0 0 0\n")
    _os.close(_fd)
    if _launch is not None:
        _launch["_main"]()
