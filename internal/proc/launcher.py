# The launcher: what Bootstrap runs when the host starts an interpreter
# for a program file (Command.Main), ahead of the run that will take it or
# for a run at once. The host sends it over the handshake (_fd), after the
# byte "L" (as source) or "C" (as code an earlier interpreter of the same
# binary compiled), so nothing on disk is read before the run but the
# interpreter's own start-up. Its top level prepares and waits: it
# compiles the source the host expects the program to hold and imports
# what its top-level import lines name, makes the bytecode cache of the
# helper module, tells the host "w", and blocks until the run arrives
# ("R"), then places the run's descriptors, moves the handshake after
# them and changes to the run's directory. Bootstrap then does what it
# does for every child (SIGINT, stray descriptors, the parent check, the
# sandbox) and calls _main, which gives the program the environment,
# argv, sys.path and __main__ a direct `python3 FLAGS MAIN ARGS` start
# would have given it and runs it.
import os as _os
import sys as _sys

# Under -c, sys.path starts with "" (the working directory, which a
# script may write): nothing this interpreter imports before its program
# may come from there.
_path0 = bool(_sys.path) and _sys.path[0] == "" and not getattr(_sys.flags, "safe_path", False)
if _path0:
    del _sys.path[0]
_modules = set(_sys.modules)
_CodeType = type(_take.__code__)
_prepared = _take(int(_take(8), 16))
_precompiled = None
if _prepared:
    try:
        _precompiled = compile(_prepared, "<execute-code main>", "exec", dont_inherit=True)
    except BaseException:
        # The program is compiled from its file at the run, so the error
        # reads as a direct start's would.
        _precompiled = None
if _precompiled is not None:
    # The modules the program's top-level import lines name, which its
    # first statements import anyway: a kernel's runner costs its
    # threading and the rest here, not on its run.
    for _line in _prepared.split(b"\n"):
        if _line.startswith(b"import "):
            _names = [_p.split()[0] for _p in _line[7:].split(b"#")[0].split(b",") if _p.strip()]
        elif _line.startswith(b"from ") and b" import " in _line:
            _names = [_line[5:].split()[0]]
        else:
            continue
        for _n in _names:
            _n = _n.decode("ascii", "replace")
            if all(_p.isidentifier() for _p in _n.split(".")):
                try:
                    __import__(_n)
                except BaseException:
                    pass  # the program's own import fails as it would
_module_name = _os.fsdecode(_take(int(_take(8), 16)))
_module_source = _take(int(_take(8), 16))
# What an earlier interpreter of this binary and shape made of the same
# source, when the host kept it (empty otherwise).
_module_given = _take(int(_take(8), 16))
# The module's checked hash-based .pyc (PEP 552), made now and written
# beside the program at the run: import validates it against the file's
# bytes, so it is used only while the file holds the source it was made
# of, and the import compiles nothing. The one given is taken only if it
# is such a cache of exactly this source and holds code; one made here is
# handed back ("p", the length in 8 hex digits, the bytes), so that the
# host gives it to the next interpreter of this binary and shape, which
# then compiles nothing either.
_module_pyc = None


def _fits(pyc, ext, source_hash):
    # A checked (flags 3) hash-based cache of this source, by this
    # interpreter's magic number, holding code.
    try:
        import marshal

        return (pyc[:8] == ext.MAGIC_NUMBER + b"\x03\x00\x00\x00" and pyc[8:16] == source_hash
                and type(marshal.loads(memoryview(pyc)[16:])) is _CodeType)
    except Exception:
        return False


if _module_name and not getattr(_sys, "pycache_prefix", None):
    try:
        import _imp

        _ext = _sys.modules["_frozen_importlib_external"]
        _hash = _imp.source_hash(_ext._RAW_MAGIC_NUMBER, _module_source)
        if _fits(_module_given, _ext, _hash):
            _module_pyc = _module_given
        else:
            _module_pyc = _ext._code_to_hash_pyc(
                compile(_module_source, "<execute-code module>", "exec", dont_inherit=True), _hash, True)
            _b = b"p%08x" % len(_module_pyc) + _module_pyc
            while _b:
                _b = _b[_os.write(_fd, _b):]
    except BaseException:
        _module_pyc = None  # the import compiles the file, as without
del _module_source, _module_given
import _socket

# What the start-up left in python's buffers stays with the start-up's
# pipes.
for _f in (_sys.stdout, _sys.stderr):
    try:
        _f.flush()
    except Exception:
        pass
_os.write(_fd, b"w\n")
if _os.read(_fd, 1) != b"R":
    _os._exit(125)
_spec = iter(_take(int(_take(8), 16)).split(b"\0"))


def _field():
    return next(_spec)


def _fields():
    return [_field() for _ in range(int(_field()))]


_main_path = _os.fsdecode(_field())
_cwd = _field()
_argv = [_os.fsdecode(_a) for _a in _fields()]
_orig_argv = [_os.fsdecode(_a) for _a in _fields()]
_unset = [_os.fsdecode(_k) for _k in _fields()]
_set = _fields()
_set = [(_os.fsdecode(_set[_i]), _os.fsdecode(_set[_i + 1])) for _i in range(0, len(_set), 2)]
_title = _field()
_targets = [int(_t) for _t in _field().split(b",") if _t]
_closed = [int(_t) for _t in _field().split(b",") if _t]
_hs = int(_field())
del _spec

# The run's descriptors travel as SCM_RIGHTS on one byte "F", in the
# order of _targets: its own output pipes (fds 1 and 2; the start-up's
# are left to the start-up), then its extra files; the handshake goes
# right after the extra files, as for a child started with them.
_s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, _fd)
try:
    _msg, _anc, _flags, _addr = _s.recvmsg(1, _socket.CMSG_SPACE(4 * len(_targets)))
finally:
    _s.detach()
_got = []
for _level, _type, _data in _anc:
    if _level == _socket.SOL_SOCKET and _type == _socket.SCM_RIGHTS:
        _got += [int.from_bytes(_data[_i:_i + 4], _sys.byteorder) for _i in range(0, len(_data) - 3, 4)]
if _msg != b"F" or _flags & getattr(_socket, "MSG_CTRUNC", 8) or len(_got) != len(_targets):
    _os._exit(125)
_moves = list(zip(_got, _targets)) + [(_fd, _hs)]
# Every source is copied above every source and target first, so no
# placement can overwrite a descriptor still to be placed; whatever is
# left above the handshake is closed by Bootstrap.
_top = max([_a for _a, _b in _moves] + [_hs]) + 1
for _i, (_a, _b) in enumerate(_moves):
    _os.dup2(_a, _top + _i)
for _i, (_a, _b) in enumerate(_moves):
    _os.dup2(_top + _i, _b)
for _c in _closed:
    try:
        _os.close(_c)
    except OSError:
        pass
_fd = _hs


def _retitle(title):
    # /proc/<pid>/cmdline shows the run's command line, not the -c
    # program: written over python's own argv area as one string (the
    # setproctitle convention, which a last byte other than NUL tells the
    # kernel), through /proc/self/mem before any confinement. A title
    # that does not fit leaves the command line as it is.
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])
        if len(title) + 2 > min(end - start, 4096):
            return
        with open("/proc/self/mem", "r+b", buffering=0) as f:
            f.seek(start)
            f.write(title + b"\0" + b" " * (end - start - len(title) - 1))
    except Exception:
        pass


_retitle(_title)
del _title
if _cwd:
    try:
        _os.chdir(_cwd)
    except OSError as _e:
        _os.write(_fd, b"fail chdir " + _cwd + b": " + (_e.strerror or "").encode() + b"\n")
        _os._exit(124)
del _a, _b, _moves, _got, _top, _s, _msg, _anc, _data

# Leading traceback entries of these files are the launcher's, not the
# program's: a direct start has none.
_OWN = ("<string>", "<execute-code bootstrap>", "<execute-code launcher>")


def _refile(code, name):
    consts = code.co_consts
    if any(type(c) is _CodeType for c in consts):
        consts = tuple(_refile(c, name) if type(c) is _CodeType else c for c in consts)
    return code.replace(co_filename=name, co_consts=consts)


def _hide_own_frames():
    # Python prints an uncaught exception through sys.excepthook with the
    # whole traceback; this hook, installed once the program's exception
    # passes here, hands the program's hook (the shim's, the script's or
    # python's own) only the program's frames.
    hook = _sys.excepthook

    def excepthook(exc_type, exc, tb):
        if _sys.excepthook is excepthook:
            _sys.excepthook = hook
        while tb is not None and tb.tb_frame.f_code.co_filename in _OWN:
            tb = tb.tb_next
        if isinstance(exc, BaseException):
            exc.__traceback__ = tb
        if getattr(_sys, "last_value", None) is exc:
            _sys.last_traceback = tb
        return hook(exc_type, exc, tb)

    _sys.excepthook = excepthook


def _cache_module(main_dir):
    global _module_pyc
    data, _module_pyc = _module_pyc, None
    if data is None:
        return
    try:
        ext = _sys.modules["_frozen_importlib_external"]
        cached = ext.cache_from_source(_os.path.join(main_dir, _module_name))
        _os.makedirs(_os.path.dirname(cached), exist_ok=True)
        ext._write_atomic(cached, data)
    except Exception:
        pass  # the import compiles the file, as without


def _main():
    global _precompiled, _prepared
    environ = _os.environ
    for k in _unset:
        environ.pop(k, None)
    for k, v in _set:
        environ[k] = v
    site = _sys.modules.get("site")
    names = {k for k in _unset} | {k for k, v in _set}
    if site is not None and names & {"HOME", "PYTHONUSERBASE"} and getattr(site, "USER_BASE", None) is not None:
        # site derived the user base from the start-up HOME; the run's
        # HOME gives what a start under it would have derived.
        site.USER_BASE = None
        site.USER_SITE = None
        site.getusersitepackages()
    _sys.argv = _argv
    if hasattr(_sys, "orig_argv"):
        _sys.orig_argv = _orig_argv
    path = _main_path if _os.path.isabs(_main_path) else _os.path.join(_os.getcwd(), _main_path)
    if _path0:
        _sys.path.insert(0, _os.path.dirname(_os.path.realpath(path)))
    for m in {"_socket"} - _modules:
        _sys.modules.pop(m, None)
    _cache_module(_os.path.dirname(path))
    main = _sys.modules["__main__"]
    g = main.__dict__
    g["__file__"] = path
    g["__cached__"] = None
    g["__loader__"] = _sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    code, prepared = _precompiled, _prepared
    _precompiled = _prepared = None
    try:
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            _sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (_orig_argv[0], path, e.errno, e.strerror))
            _sys.stderr.flush()
            raise SystemExit(2)
        if code is None or source != prepared:
            code = compile(source, path, "exec", dont_inherit=True)
        else:
            code = _refile(code, path)
        del source, prepared
        exec(code, g)
    except SystemExit:
        raise
    except BaseException:
        _hide_own_frames()
        raise
