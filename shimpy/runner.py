"""runner.py: the persistent python3 kernel of execute-code's session mode.

The host writes one JSON request per line on fd 0 (init, eval, shutdown) and
reads frames from a private control descriptor: the byte 0x1E, "lemon-python",
a tab, one line of compact ASCII JSON and a newline. Everything user code
writes (print, C extensions, subprocesses) lands in one capture pipe, fd 1
and fd 2 alike, as in a per-call run, so it keeps the order it was written
in; a drainer thread turns it into base64 stream frames of the open cell,
so bytes shaped like frames reach the host only as payload. Standard
library only; kernelworker/protocol.go is the host's side of the protocol
this program speaks.

Output attribution. Every thread is tagged at
construction with the generation (1, 2, ...) of the cell that made it: its
creator's tag, or the open cell's when the creator is untagged; the main
thread stays untagged. There are two kinds of writes, attributed differently:

* Python-level writes through sys.stdout / sys.stderr (and their .buffer)
  pass through wrappers that know the writing thread. A write from a thread
  tagged with another generation than the open cell's (an earlier cell's
  thread, or any tagged thread while no cell is open) is dropped and
  counted before it reaches the pipe. The check and the write happen under
  one lock that cell transitions also take, so a write that passed the
  check lands in the pipe before its cell can close.
* Descriptor-level bytes (os.write(1, ...), C code, subprocesses) carry no
  thread identity: they are attributed to whichever cell is open when the
  drainer reads them. The boundaries are still tight: a cell's end drains
  the pipe into that cell before `done`, bytes read while no cell is open
  are dropped and counted, and bytes still unread when the next cell opens
  are drained and dropped (counted) before `started`, so nothing written
  before a cell opened can leak into it. Only descriptor-level bytes an
  earlier cell's thread or child writes *while* a later cell is open are
  indistinguishable from that cell's own output and are delivered to it.

The `done` frame carries "dropped": the late-output bytes dropped since the
previous `done`.
"""

import binascii
import builtins
import io
import os
import select
import stat as _stat
import sys
import threading
import time
import _signal
import _thread
import _weakref

# json, linecache, signal, types and weakref are not imported: with what
# they pull in (re, enum, tokenize) they would cost a new kernel about as
# much as the interpreter's own start-up. Requests are decoded and frames
# encoded with the C accelerator json itself uses, so the bytes are exactly
# json.dumps's and the accepted texts exactly json.loads's.
try:
    from _json import encode_basestring_ascii as _encode_str
    from _json import make_scanner as _make_scanner
except ImportError:  # an interpreter built without the accelerator
    _encode_str = None
    _make_scanner = None

PROTOCOL_VERSION = 1
FRAME_PREFIX = b"\x1elemon-python\t"
STREAM_CHUNK = 65536
# The most a write to a pipe may carry and still land in one piece
# whatever else writes to it (POSIX's PIPE_BUF is at least 512; Linux's
# is 4096).
ATOMIC_WRITE = getattr(select, "PIPE_BUF", 512)
MAX_QUIESCE_SECONDS = 0.5
# What a cell's opening drains (and drops) from the pipe at most: more
# than a pipe holds, so only a writer still running can outpace it.
LATE_DRAIN_BYTES = 1 << 20
EXIT_OK = 0
EXIT_FATAL = 70
EXIT_CONTROL_LOST = 75
CELL_FILENAME = "<cell>"
NAME_BUDGET = 4096
MESSAGE_BUDGET = 49152
TRACEBACK_BUDGET = 81920
TRACEBACK_FIELD_BUDGET = 4096
REASON_BUDGET = 65536
TRUNCATION_MARKER = "... [truncated]"
RECURSIVE_CUTOFF = 3
# The runner's own exits skip the drain os._exit gets for cells.
_real_exit = os._exit
BELLS = (3, 4)
# The host's capture pipe (read end, write end): the host keeps a copy of
# the read end, so what is still in the pipe when the kernel dies (an
# os._exit right after a write) reaches the cell's result all the same.
CAPTURE = (5, 6)
# How long an os._exit of the kernel waits for the drainer, and then
# frames what is left in the capture pipe.
EXIT_DRAIN_SECONDS = 1.0
SHIM_MODULE = "exec_tools"
# How the host's one line before every cell begins (shimpy.RenderScript).
HELPER_IMPORT = "from " + SHIM_MODULE + " import "
HELPER_NAMES = ("ToolError", "read", "grep", "find", "ls", "webfetch", "text", "notify", "batch")
UNSUPPORTED_INPUT_MESSAGE = (
    "input() is not supported: the persistent python kernel has no "
    "interactive stdin; read from a file or call a helper function instead"
)
STDIN_UNAVAILABLE = "stdin is not available in the python kernel"

_MISSING = object()
_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)
_ModuleType = type(sys)
_CodeType = type(compile("", "", "exec"))
_JSON_WHITESPACE = " \t\n\r"
_JSON_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _ScanContext(object):
    """What json's C scanner reads off a decoder: json.loads's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_JSON_CONSTANTS.__getitem__)


_scan = _make_scanner(_ScanContext()) if _make_scanner is not None else None


def _skip_json_whitespace(text, index):
    while index < len(text) and text[index] in _JSON_WHITESPACE:
        index += 1
    return index


def _json_loads(text):
    """json.loads(text) for a str: the same values, the same refusals."""
    if _scan is not None and not text.startswith("\ufeff"):
        try:
            value, end = _scan(text, _skip_json_whitespace(text, 0))
        except Exception:
            # The scanner words its errors only when json.decoder is
            # loaded; json.loads below gives the real refusal.
            pass
        else:
            if _skip_json_whitespace(text, end) == len(text):
                return value
    import json

    return json.loads(text)


def _json_string(s):
    """json.dumps(s) for a str (ASCII-escaped)."""
    if _encode_str is None:
        import json

        return json.dumps(s)
    return _encode_str(s)


def _encode_frame(frame):
    """Compact ASCII JSON of a frame whose values are str, int or None."""
    parts = []
    for key, value in frame.items():
        if value is None:
            text = "null"
        elif type(value) is int:
            text = "%d" % value
        else:
            text = _json_string(value)
        parts.append('"%s":%s' % (key, text))
    return "{" + ",".join(parts) + "}"


class UnsupportedInput(RuntimeError):
    """input() or a read of sys.stdin: a kernel has no interactive stdin."""


class RequestError(Exception):
    """A request the protocol forbids; the runner answers with `fatal`."""


def _refuse_input(prompt=""):
    shown = "" if prompt is None else str(prompt)
    if shown:
        raise UnsupportedInput(shown + "\n" + UNSUPPORTED_INPUT_MESSAGE)
    raise UnsupportedInput(UNSUPPORTED_INPUT_MESSAGE)


class _NoStdin(object):
    """Stands in for sys.stdin: every read raises UnsupportedInput."""

    encoding = "utf-8"
    errors = "replace"
    closed = False
    name = "<stdin>"
    mode = "r"
    newlines = None
    line_buffering = False

    @property
    def buffer(self):
        return self

    def read(self, *args, **kwargs):
        raise UnsupportedInput(UNSUPPORTED_INPUT_MESSAGE)

    readline = readlines = read1 = readinto = read

    def __iter__(self):
        return self

    def __next__(self):
        raise UnsupportedInput(UNSUPPORTED_INPUT_MESSAGE)

    def fileno(self):
        raise io.UnsupportedOperation(STDIN_UNAVAILABLE)

    def readable(self):
        return False

    def writable(self):
        return False

    def seekable(self):
        return False

    def isatty(self):
        return False

    def close(self):
        pass

    def flush(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


def _without_surrogates(s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.translate(_SURROGATES)
    return s


def _json_cost(s):
    # json.dumps escapes exactly as the budget rule counts: 2 bytes for
    # " \ \b \f \n \r \t, 6 for other controls and BMP non-ASCII (0x7F
    # included), 12 for a non-BMP character, quotes included.
    return len(_json_string(s))


def _bound(s, budget):
    """s without lone surrogates, cut to budget JSON bytes; (text, cut)."""
    s = _without_surrogates(s)
    # Every character costs at least one byte, so only a short string can
    # fit; a multi-megabyte one is never encoded whole.
    if len(s) + 2 <= budget and _json_cost(s) <= budget:
        return s, False
    lo, hi = 0, min(len(s), budget)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _json_cost(s[:mid] + TRUNCATION_MARKER) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return s[:lo] + TRUNCATION_MARKER, True


def _is_positive_int(value):
    return type(value) is int and value > 0


def _parse_request(text):
    try:
        request = _json_loads(text)
    except (ValueError, RecursionError):
        raise RequestError("request is not valid JSON") from None
    if not isinstance(request, dict):
        raise RequestError("request is not a JSON object")
    version = request.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise RequestError("unsupported protocol version")
    kind = request.get("type")
    if kind == "init":
        cwd = request.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            raise RequestError("init requires a cwd string")
    elif kind == "eval":
        cell_id = request.get("id")
        if not isinstance(cell_id, str) or not cell_id:
            raise RequestError("eval requires an id string")
        if not isinstance(request.get("code"), str):
            raise RequestError("eval requires a code string")
        cwd = request.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise RequestError("eval cwd must be a non-empty string when present")
    elif kind != "shutdown":
        raise RequestError("unknown request type: %r" % (kind,))
    return request


class _TaggedText(object):
    """sys.stdout / sys.stderr: drops writes of threads of other cells."""

    def __init__(self, kernel, stream):
        self._kernel = kernel
        self._stream = stream
        self._binary = None

    def write(self, s):
        kernel = self._kernel
        with kernel.gate:
            if kernel.writer_is_stale():
                try:
                    kernel.count_dropped(len(s.encode("utf-8", "replace")))
                except Exception:
                    pass
                return len(s) if isinstance(s, str) else 0
            return self._stream.write(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        with self._kernel.gate:
            return self._stream.flush()

    @property
    def buffer(self):
        raw = self._stream.buffer
        if self._binary is None or self._binary._stream is not raw:
            self._binary = _TaggedBinary(self._kernel, raw)
        return self._binary

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _TaggedBinary(object):
    """sys.stdout.buffer and friends, with the same stale-writer check."""

    def __init__(self, kernel, stream):
        self._kernel = kernel
        self._stream = stream

    def write(self, b):
        kernel = self._kernel
        with kernel.gate:
            if kernel.writer_is_stale():
                try:
                    size = memoryview(b).nbytes
                except TypeError:
                    size = 0
                kernel.count_dropped(size)
                return size
            return self._stream.write(b)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        with self._kernel.gate:
            return self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _WholeCharWriter(io.RawIOBase):
    """The raw layer of sys.stdout / sys.stderr.

    Every write is small enough to reach the shared pipe in one piece and
    ends on a UTF-8 character boundary, so bytes that another thread or a
    child writes at the same time never land inside a character. The
    descriptor stays open when the stream closes: it is fd 1 or fd 2.
    """

    def __init__(self, fd, owner):
        io.RawIOBase.__init__(self)
        self._fd = fd
        # The interpreter's own stream on fd, flushed: it closes fd when
        # collected, so it must outlive every flush of this one.
        self._owner = owner

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return os.isatty(self._fd)

    def write(self, b):
        # BufferedWriter hands over bytes-shaped views: len is their size.
        if len(b) <= ATOMIC_WRITE:
            return os.write(self._fd, b)
        view = memoryview(b).cast("B")
        n = ATOMIC_WRITE
        while n > 0 and view[n] & 0xC0 == 0x80:
            n -= 1
        if n == 0:  # no character starts in the first ATOMIC_WRITE bytes
            n = ATOMIC_WRITE
        return os.write(self._fd, view[:n])


def _whole_char_text(stream, fd):
    """A line-buffered text stream on fd like stream, over _WholeCharWriter."""
    raw = _WholeCharWriter(fd, stream)
    return io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=getattr(stream, "encoding", None) or "utf-8",
        errors=getattr(stream, "errors", None) or "strict",
        newline="\n",
        line_buffering=True,
    )


class _LinecacheWatch(object):
    """A meta path finder that shares the open cell's lines with linecache
    the moment linecache is first imported.

    The first warning of a fresh kernel imports linecache itself, after its
    cell compiled, and would otherwise find no lines for <cell>. It finds
    linecache like the finders after it, and leaves once it has.
    """

    def __init__(self, kernel):
        self._kernel = kernel

    def find_spec(self, name, path=None, target=None):
        if name != "linecache":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if getattr(spec.loader, "exec_module", None) is not None:
            spec.loader = _SharingLoader(spec.loader, self._kernel)
        return spec


class _SharingLoader(object):
    """linecache's own loader, sharing the cell's lines once it ran."""

    def __init__(self, loader, kernel):
        self._loader = loader
        self._kernel = kernel

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self._loader
        self._kernel._share_cell_lines()


class _Pipe(object):
    """One capture pipe: its read end and the lock its readers share."""

    def __init__(self, name, fd):
        self.name = name
        self.fd = fd
        # Held by whoever reads the pipe and turns what it read into frames
        # (or drops it), so the open cell cannot change in between.
        self.lock = threading.Lock()
        self.eof = False
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)

    def ready(self):
        """Whether a read would find bytes (or the end) now: every cell's
        open and close look at a pipe that is nearly always empty, and a
        failed read costs an exception."""
        if self.eof:
            return False
        try:
            return bool(self.poller.poll(0))
        except (OSError, ValueError):
            return True

    def read(self):
        """Bytes available now, or None when there are none (or no more)."""
        if self.eof:
            return None
        try:
            data = os.read(self.fd, STREAM_CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return None
        return data


class Kernel(object):
    def __init__(self, runner_globals):
        self.pid = os.getpid()
        self.runner_globals = runner_globals
        # The runner's own module object, kept alive after the cells'
        # module replaces it as __main__.
        self.runner_module = sys.modules.get("__main__")
        self.runner_file = runner_globals.get("__file__") or ""
        self.runner_real = os.path.realpath(self.runner_file) if self.runner_file else ""
        self.runner_code_file = Kernel.__init__.__code__.co_filename
        self.ctl = None
        self.wlock = threading.Lock()
        # Python-level writes and cell transitions: a write that passed the
        # stale-writer check reaches the pipe before the cell can close.
        self.gate = threading.RLock()
        self.count_lock = threading.Lock()
        self.dropped = 0
        self.open_id = None
        self.open_gen = None
        self.generation = 0
        self.base_cwd = None
        self.bells = None
        self.pipe = None
        self.sources = {}
        self.cell_lines = None
        # (line, code) of the helper import line, compiled once.
        self.prelude = None
        # (code, argument count or None, takes bells) of the shim's
        # _configure.
        self.configure_plan = None
        self.requests = None
        self.namespace = None
        self.active_threads = getattr(threading, "_active", {})
        self.get_ident = _thread.get_ident

    # -- start-up --

    def start(self):
        here = os.path.dirname(self.runner_real)
        if here and here not in sys.path:
            sys.path.insert(0, here)
        # Before this process opens any descriptor of its own: afterwards a
        # free 3 or 4 could be one of ours.
        self.bells = self._inherited_bells()
        self.requests = sys.stdin
        self._refuse_input()
        self._setup_descriptors()
        threading.Thread(target=self._drain, args=(self.pipe,), name="exec-drain", daemon=True).start()
        self._install_thread_tagging()
        self._install_exit_drain()
        self._make_namespace()
        self._hide_runner_path()
        if "linecache" not in sys.modules:
            sys.meta_path.insert(0, _LinecacheWatch(self))
        try:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        except (OSError, ValueError):
            pass
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _inherited_bells(self):
        try:
            for fd in BELLS:
                os.fstat(fd)
                # Until a cell's _configure adopts them, user children must
                # not hold the bells either.
                os.set_inheritable(fd, False)
        except OSError:
            return None
        return BELLS

    @staticmethod
    def _capture_pipe():
        try:
            if all(_stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in CAPTURE):
                # The cells' children must hold neither end but fds 1 and 2.
                for fd in CAPTURE:
                    os.set_inheritable(fd, False)
                return CAPTURE
        except OSError:
            pass
        return os.pipe()

    def _refuse_input(self):
        builtins.input = _refuse_input
        stand_in = _NoStdin()
        sys.stdin = stand_in
        sys.__stdin__ = stand_in

    def _setup_descriptors(self):
        try:
            os.setsid()
        except OSError:
            pass
        try:
            self.ctl = os.dup(1)
        except OSError:
            _real_exit(EXIT_CONTROL_LOST)
        os.set_inheritable(self.ctl, False)
        try:
            os.set_inheritable(0, False)
        except OSError:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        # One pipe behind fd 1 and fd 2, as a per-call run has: what the
        # cell, its threads and its children write comes back in the order
        # it was written, which two pipes drained apart cannot keep.
        read_end, write_end = self._capture_pipe()
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        os.set_blocking(read_end, False)
        self.pipe = _Pipe("stdout", read_end)
        self.stdout = _TaggedText(self, _whole_char_text(sys.stdout, 1))
        self.stderr = _TaggedText(self, _whole_char_text(sys.stderr, 2))
        # __stdout__ and __stderr__ too: code that "restores" sys.stdout
        # from them keeps its writes attributed by thread.
        sys.stdout = sys.__stdout__ = self.stdout
        sys.stderr = sys.__stderr__ = self.stderr

    def _install_exit_drain(self):
        # os._exit skips every handler, so what the drainer had read but
        # not yet framed, and what is still in the pipe, would be lost,
        # where a per-call run's output reaches the host whole. The kernel
        # itself waits for the drainer and frames the rest first; a forked
        # child exits at once, as it holds no frame channel of its own.
        kernel = self
        real_exit = _real_exit

        def _exit(status):
            if os.getpid() == kernel.pid and kernel.pipe is not None:
                kernel._flush_streams()
                pipe = kernel.pipe
                if pipe.lock.acquire(timeout=EXIT_DRAIN_SECONDS):
                    try:
                        kernel._drain_now(pipe, deliver=True,
                                          deadline=time.monotonic() + EXIT_DRAIN_SECONDS)
                    except Exception:
                        pass
                    finally:
                        pipe.lock.release()
            real_exit(status)

        for attr in ("__name__", "__qualname__", "__doc__"):
            try:
                setattr(_exit, attr, getattr(real_exit, attr))
            except (AttributeError, TypeError):
                pass
        _exit.__wrapped__ = real_exit
        os._exit = _exit

    def _install_thread_tagging(self):
        kernel = self
        active = self.active_threads
        get_ident = self.get_ident
        original = threading.Thread.__init__

        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            # The creator is looked up without current_thread(), which
            # would build a dummy thread, re-entering this very __init__.
            creator = active.get(get_ident())
            tag = getattr(creator, "_exec_gen", None) if creator is not None else None
            if tag is None:
                tag = kernel.open_gen
            if tag is not None:
                self._exec_gen = tag

        for attr in ("__name__", "__qualname__", "__doc__"):
            try:
                setattr(__init__, attr, getattr(original, attr))
            except (AttributeError, TypeError):
                pass
        __init__.__wrapped__ = original
        threading.Thread.__init__ = __init__

    def _make_namespace(self):
        # The cells' globals are a real __main__ module, so `import
        # __main__` and pickle find what cells define.
        module = _ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        self.namespace = module.__dict__
        self.cell_module = module
        sys.modules["__main__"] = module

    @staticmethod
    def _hide_runner_path():
        # A cell sees what the interactive interpreter shows, not where the
        # host staged the runner (docs/decisions.md).
        sys.argv = [""]
        if hasattr(sys, "orig_argv"):
            sys.orig_argv = sys.orig_argv[:1]

    def _after_fork_in_child(self):
        # A forked child must never speak for the kernel, and locks held by
        # threads that do not exist in the child must not block its prints.
        self.ctl = None
        self.wlock = threading.Lock()
        self.gate = threading.RLock()
        self.count_lock = threading.Lock()

    # -- frames --

    @staticmethod
    def _encode(frame):
        return FRAME_PREFIX + _encode_frame(frame).encode("ascii") + b"\n"

    def send(self, frame):
        data = self._encode(frame)
        with self.wlock:
            self._write_locked(data)

    def _write_locked(self, data):
        if self.ctl is None or os.getpid() != self.pid:
            return
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.ctl, view)
                view = view[written:]
        except OSError:
            _real_exit(EXIT_CONTROL_LOST)

    def _close_control(self):
        with self.wlock:
            ctl, self.ctl = self.ctl, None
        if ctl is not None:
            try:
                os.close(ctl)
            except OSError:
                pass

    # -- attribution --

    def writer_is_stale(self):
        thread = self.active_threads.get(self.get_ident())
        if thread is None:
            return False
        tag = getattr(thread, "_exec_gen", None)
        return tag is not None and tag != self.open_gen

    def count_dropped(self, size):
        if size:
            with self.count_lock:
                self.dropped += size

    def _take_dropped(self):
        with self.count_lock:
            dropped, self.dropped = self.dropped, 0
        return dropped

    def _emit(self, pipe, data):
        """Frames data for the open cell, or drops it; pipe.lock is held."""
        cell = self.open_id
        if cell is None:
            self.count_dropped(len(data))
            return
        for start in range(0, len(data), STREAM_CHUNK):
            chunk = data[start:start + STREAM_CHUNK]
            self.send({
                "v": PROTOCOL_VERSION,
                "type": "stream",
                "id": cell,
                "stream": pipe.name,
                "data": binascii.b2a_base64(chunk, newline=False).decode("ascii"),
            })

    def _drain(self, pipe):
        while True:
            try:
                select.select([pipe.fd], [], [])
            except (OSError, ValueError):
                return
            with pipe.lock:
                data = pipe.read()
                if data:
                    self._emit(pipe, data)
            if pipe.eof:
                return

    def _drain_now(self, pipe, deliver, deadline=None, limit=None):
        """Reads pipe until it is empty (pipe.lock held by the caller)."""
        if not pipe.ready():
            return
        taken = 0
        while True:
            data = pipe.read()
            if not data:
                return
            if deliver:
                self._emit(pipe, data)
            else:
                self.count_dropped(len(data))
            taken += len(data)
            if limit is not None and taken >= limit:
                return
            if deadline is not None and time.monotonic() >= deadline:
                return

    def _flush_streams(self, own=True):
        """Flushes sys.stdout/sys.stderr and, with own, the kernel's wrappers."""
        seen = [] if own else [self.stdout, self.stderr]
        for stream in (sys.stdout, sys.stderr, self.stdout, self.stderr):
            for other in seen:
                if stream is other:
                    break
            else:
                seen.append(stream)
                try:
                    stream.flush()
                except Exception:
                    pass

    # -- cells --

    def _open_cell(self, cell_id, generation):
        pipe = self.pipe
        with self.gate, pipe.lock:
            # Whatever is still unread was written before this cell opened:
            # it belongs to no open cell (docs/decisions.md).
            self._drain_now(pipe, deliver=False, limit=LATE_DRAIN_BYTES)
            with self.wlock:
                self._write_locked(b"%s{\"v\":%d,\"type\":\"started\",\"id\":%s}\n" % (
                    FRAME_PREFIX, PROTOCOL_VERSION, _json_string(cell_id).encode("ascii")))
                self.open_id = cell_id
                self.open_gen = generation

    def _close_cell(self, cell_id):
        pipe = self.pipe
        # Streams a cell installed may hold locks of their own around writes
        # to the kernel's wrappers, which wait for the gate: they are
        # flushed before the gate is taken, the wrappers under it.
        self._flush_streams(own=False)
        with self.gate:
            for stream in (self.stdout, self.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            deadline = time.monotonic() + MAX_QUIESCE_SECONDS
            with pipe.lock:
                self._drain_now(pipe, deliver=True, deadline=deadline)
                with self.wlock:
                    self.open_id = None
                    self.open_gen = None
                    # The frame _encode makes of {"v", "type", "id",
                    # "dropped"}, spelled out: it ends every cell.
                    self._write_locked(b"%s{\"v\":%d,\"type\":\"done\",\"id\":%s,\"dropped\":%d}\n" % (
                        FRAME_PREFIX, PROTOCOL_VERSION, _json_string(cell_id).encode("ascii"), self._take_dropped()))

    def _run_cell(self, request):
        cell_id = request["id"]
        self.generation += 1
        generation = self.generation
        self._open_cell(cell_id, generation)
        try:
            try:
                prelude, code = self._compile(request["code"])
                self._enter_cwd(request.get("cwd") or self.base_cwd)
                bridge = request.get("bridge")
                if bridge is not None:
                    self._install_bridge(bridge, generation)
                else:
                    self._uninstall_bridge()
                if prelude is not None:
                    exec(prelude, self.namespace)
                exec(code, self.namespace)
            except BaseException as exc:
                if os.getpid() != self.pid:
                    self._leave_forked_child(exc)
                self._report(cell_id, exc)
            else:
                if os.getpid() != self.pid:
                    self._leave_forked_child(None)
        finally:
            self._close_cell(cell_id)

    def _leave_forked_child(self, exc):
        # A child forked by the cell that ran to the cell's end must not go
        # on to read the kernel's requests.
        try:
            if exc is not None and not isinstance(exc, SystemExit):
                import traceback

                traceback.print_exception(type(exc), exc, exc.__traceback__)
            self._flush_streams()
        finally:
            if exc is None:
                status = 0
            elif isinstance(exc, SystemExit):
                status = exc.code if type(exc.code) is int else (0 if exc.code is None else 1)
            else:
                status = 1
            _real_exit(status & 0xFF)

    def _compile(self, source):
        """The cell's code: (helper import or None, the rest)."""
        head, newline, body = source.partition("\n")
        prelude = self._prelude(head) if newline else None
        if prelude is not None:
            # The host's import line is the same in every cell: it is
            # compiled once, and the rest after a "pass" that keeps it on
            # the lines it has in the whole source, behind a first
            # statement (so a leading string is no docstring, and a
            # __future__ import is refused as it would be after the import).
            code = compile("pass\n" + body, CELL_FILENAME, "exec", dont_inherit=True)
        else:
            code = compile(source, CELL_FILENAME, "exec", dont_inherit=True)
        # Lines as the compiler numbers them: only \n, \r\n and \r end one
        # (str.splitlines would also split at \f, \x1c or U+2028).
        lines = [line + "\n" for line in source.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
        self.cell_lines = lines
        self._share_cell_lines()
        self._remember_source(code, lines)
        return prelude, code

    def _prelude(self, head):
        """The compiled helper import line head, or None if head is not one
        that stands alone on the first line."""
        if self.prelude is not None and self.prelude[0] == head:
            return self.prelude[1]
        if not head.startswith(HELPER_IMPORT) or "\r" in head:
            return None
        try:
            # A line that does not compile alone continues on the next
            # (a bracket, a backslash): the whole source is compiled.
            code = compile(head, CELL_FILENAME, "exec", dont_inherit=True)
        except SyntaxError:
            return None
        self._remember_source(code, [head + "\n"])
        self.prelude = (head, code)
        return code

    def _share_cell_lines(self):
        # traceback.print_exc(), warnings and inspect read source lines
        # through linecache. It is not imported for them (with tokenize and
        # re it would slow every kernel's start): once something has, each
        # cell's lines are put there when the cell compiles.
        linecache = sys.modules.get("linecache")
        cache = getattr(linecache, "cache", None)
        if isinstance(cache, dict) and self.cell_lines is not None:
            size = sum(len(line) for line in self.cell_lines)
            cache[CELL_FILENAME] = (size, None, self.cell_lines, CELL_FILENAME)

    def _remember_source(self, code, lines):
        # Every cell compiles as <cell>, so linecache can hold only the
        # latest; tracebacks find the lines of a function an earlier cell
        # defined through its code object instead.
        sources = self.sources
        stack = [code]
        while stack:
            current = stack.pop()
            key = id(current)

            def forget(ref, key=key):
                entry = sources.get(key)
                if entry is not None and entry[0] is ref:
                    del sources[key]

            sources[key] = (_weakref.ref(current, forget), lines)
            stack.extend(const for const in current.co_consts if isinstance(const, _CodeType))

    def _enter_cwd(self, cwd):
        try:
            os.chdir(cwd)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise RuntimeError("cell cwd is no longer accessible: %s (%s)" % (cwd, reason)) from None

    # -- the helper bridge --

    def _install_bridge(self, bridge, generation):
        if not isinstance(bridge, dict):
            raise RuntimeError("eval bridge must be an object with dir and token")
        rpc_dir = bridge.get("dir")
        if not isinstance(rpc_dir, str) or not rpc_dir:
            raise RuntimeError("eval bridge is missing its dir")
        token = bridge.get("token")
        if not isinstance(token, str) or not token:
            raise RuntimeError("eval bridge is missing its token")
        budget = bridge.get("max_text_bytes")
        if not _is_positive_int(budget):
            budget = None
        module = self._import_shim()
        configure = getattr(module, "_configure", None)
        if configure is not None:
            self._configure(configure, rpc_dir, token, budget, generation)
        namespace = self.namespace
        namespace[SHIM_MODULE] = module
        for name in HELPER_NAMES:
            value = getattr(module, name, _MISSING)
            if value is not _MISSING:
                namespace[name] = value

    def _configure(self, configure, rpc_dir, token, budget, generation):
        args = [rpc_dir, token, budget, generation]
        code = getattr(configure, "__code__", None)
        plan = self.configure_plan
        if plan is None or plan[0] is not code:
            # What the shim's _configure takes, read once per code object.
            nargs, bells = None, False
            if code is not None:
                accepted = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
                if not code.co_flags & 0x04:  # CO_VARARGS
                    nargs = code.co_argcount
                bells = bool(code.co_flags & 0x08 or "bells" in accepted)  # CO_VARKEYWORDS
            plan = self.configure_plan = (code, nargs, bells)
        if plan[1] is not None:
            args = args[:plan[1]]
        if plan[2] and self.bells is not None:
            configure(*args, bells=self.bells)
        else:
            configure(*args)

    def _import_shim(self):
        module = sys.modules.get(SHIM_MODULE)
        if module is not None:
            return module
        # The staged shim lives as long as its kernel: a .pyc of it would
        # only be one more file in the workspace.
        saved = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        try:
            return __import__(SHIM_MODULE)
        except ImportError:
            raise RuntimeError(
                "exec_tools was not staged next to the runner; helper calls are unavailable"
            ) from None
        finally:
            sys.dont_write_bytecode = saved

    def _uninstall_bridge(self):
        # A cell without a bridge must not reach the previous cell's: its
        # helpers say they are not configured instead of waiting forever
        # on a directory nobody serves.
        module = sys.modules.get(SHIM_MODULE)
        if module is None or getattr(module, "_BRIDGE", None) is None:
            return
        lock = getattr(module, "_LOCK", None)
        if lock is None:
            module._BRIDGE = None
            return
        with lock:
            module._BRIDGE = None

    # -- exception frames --

    def _report(self, cell_id, exc):
        try:
            frame = self._exception_frame(cell_id, exc)
        except Exception:
            frame = {
                "v": PROTOCOL_VERSION,
                "type": "exception",
                "id": cell_id,
                "kind": "error",
                "name": "BaseException",
                "message": None,
                "traceback": None,
            }
        self.send(frame)

    def _exception_frame(self, cell_id, exc):
        if isinstance(exc, UnsupportedInput):
            kind = "unsupported_input"
        elif isinstance(exc, SystemExit):
            kind = "system_exit"
        elif isinstance(exc, KeyboardInterrupt):
            kind = "interrupted"
        else:
            kind = "error"
        name, name_cut = _bound(type(exc).__name__ or "<unnamed exception>", NAME_BUDGET)
        message, message_cut = _bound(self._message(exc), MESSAGE_BUDGET)
        try:
            text = self._format_traceback(exc, name, message, name_cut or message_cut)
        except Exception:
            text = "%s: <unformattable exception>" % name
        text, _ = _bound(text, TRACEBACK_BUDGET)
        return {
            "v": PROTOCOL_VERSION,
            "type": "exception",
            "id": cell_id,
            "kind": kind,
            "name": name,
            "message": message,
            "traceback": text,
        }

    @staticmethod
    def _message(exc):
        if isinstance(exc, SystemExit):
            code = exc.code
            if code is None:
                return "SystemExit"
            if isinstance(code, bool):
                return "SystemExit: %s" % ("True" if code else "False")
            if isinstance(code, int):
                return "SystemExit: %d" % code
            try:
                return "SystemExit: %s" % (str(code),)
            except Exception:
                return "SystemExit: <unprintable %s>" % type(code).__name__
        try:
            message = str(exc)
        except Exception:
            return "<unprintable %s>" % type(exc).__name__
        return message if isinstance(message, str) else "<unprintable %s>" % type(exc).__name__

    def _is_runner_frame(self, frame, filename, cache):
        if frame.f_globals is self.runner_globals:
            return True
        if filename == CELL_FILENAME:
            return False
        if filename == self.runner_code_file:
            return True
        hit = cache.get(filename)
        if hit is None:
            try:
                hit = bool(self.runner_real) and os.path.realpath(filename) == self.runner_real
            except (OSError, ValueError):
                hit = False
            cache[filename] = hit
        return hit

    def _source_line(self, code, filename, lineno, module_globals):
        if not isinstance(lineno, int) or lineno < 1:
            return ""
        if filename == CELL_FILENAME:
            entry = self.sources.get(id(code))
            if entry is None or entry[0]() is not code:
                return ""
            lines = entry[1]
            return lines[lineno - 1] if lineno <= len(lines) else ""
        try:
            import linecache

            return linecache.getline(filename, lineno, module_globals)
        except Exception:
            return ""

    def _format_traceback(self, exc, name, message, cut):
        entries = []
        cache = {}
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            code = frame.f_code
            filename = code.co_filename
            if not self._is_runner_frame(frame, filename, cache):
                entries.append((filename, tb.tb_lineno, code.co_name, code, frame.f_globals))
            tb = tb.tb_next
        out = []
        if entries:
            out.append("Traceback (most recent call last):\n")
        last = None
        repeats = 0
        for filename, lineno, function, code, module_globals in entries:
            key = (filename, lineno, function)
            if key == last:
                repeats += 1
                if repeats >= RECURSIVE_CUTOFF:
                    continue
            else:
                self._repeated(out, repeats)
                last = key
                repeats = 0
            shown_file, _ = _bound(filename, TRACEBACK_FIELD_BUDGET)
            shown_function, _ = _bound(function, TRACEBACK_FIELD_BUDGET)
            out.append('  File "%s", line %s, in %s\n' % (shown_file, "?" if lineno is None else lineno, shown_function))
            line = self._source_line(code, filename, lineno, module_globals).strip()
            if line:
                out.append("    %s\n" % line)
        self._repeated(out, repeats)
        if cut:
            out.append("%s: %s\n" % (name, message))
        else:
            import traceback

            out.extend(traceback.format_exception_only(type(exc), exc))
        return "".join(out).rstrip("\n")

    @staticmethod
    def _repeated(out, repeats):
        extra = repeats - (RECURSIVE_CUTOFF - 1)
        if extra > 0:
            out.append("  [Previous line repeated %d more time%s]\n" % (extra, "s" if extra > 1 else ""))

    # -- the request loop --

    def serve(self):
        self.start()
        while True:
            try:
                line = self.requests.buffer.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                self._stop_pumps()
                return EXIT_OK
            try:
                text = line.decode("utf-8").strip()
            except UnicodeDecodeError:
                return self._fatal("request is not valid JSON")
            if not text:
                continue
            try:
                request = _parse_request(text)
                kind = request["type"]
                if kind == "init":
                    self._init(request["cwd"])
                elif kind == "eval":
                    if self.base_cwd is None:
                        raise RequestError("eval before init")
                    self._run_cell(request)
                else:
                    self.send({"v": PROTOCOL_VERSION, "type": "bye"})
                    self._close_control()
                    self._stop_pumps()
                    return EXIT_OK
            except RequestError as exc:
                return self._fatal(str(exc))

    def _init(self, cwd):
        if self.base_cwd is not None:
            raise RequestError("duplicate init request")
        absolute = cwd if os.path.isabs(cwd) else os.path.join(os.getcwd(), cwd)
        try:
            os.chdir(cwd)
        except (OSError, ValueError):
            raise RequestError("init cwd is not accessible: %s" % cwd) from None
        self.base_cwd = absolute
        self.send({"v": PROTOCOL_VERSION, "type": "ready", "pid": os.getpid()})

    def _fatal(self, reason):
        reason, _ = _bound(reason, REASON_BUDGET)
        self.send({"v": PROTOCOL_VERSION, "type": "fatal", "reason": reason})
        self._close_control()
        self._stop_pumps()
        return EXIT_FATAL

    def _stop_pumps(self):
        # Interpreter-exit flushes and late writers must not block on pipes
        # nobody drains any more.
        try:
            null = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            return
        try:
            os.dup2(null, 1)
            os.dup2(null, 2)
        except OSError:
            pass
        finally:
            os.close(null)


def main():
    # The real stdin (the request channel) is kept by the kernel before
    # sys.stdin is replaced; the wrapper object stays referenced so fd 0
    # is never closed behind the kernel's back.
    return Kernel(globals()).serve()


if __name__ == "__main__":
    sys.exit(main())
