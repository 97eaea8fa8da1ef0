"""The execute-code guard: one per host, started with `python3 -I -S`.

It needs none of the host's code: the host writes lines on its stdin and
the guard acts only once that pipe ends. Lines:

  +<sid>   a child's session, to kill should the host die
  -<sid>   the host swept that session itself
  !<sid>   the host's sweep ran out of time: sweep that session here, now
  r<hex>   a staging root (its path bytes in hex), to clean should the host die
  q        the host is closing cleanly: its roots are its own business

At end of file every registered session is killed, pass after pass, until
passes find no one left or the bound runs out; then, unless the host said
q, what the dead host left in its roots is removed, spills excepted.
Signals go through pidfds, so a pid reused by a stranger is never hit.
Standard library only, argv[1] is the host's pid.
"""

import os
import sys
import time

# The C module, not signal.py: that wraps every constant in an enum, and
# importing enum costs the guard's start more than the rest of it.
import _signal

SWEEP_BOUND = 2.0  # seconds of killing after the host died
ENDED_BOUND = 2.0  # bound of one sweep the host gave up on
MIN_PASSES = 4  # passes made whatever the bound (a loaded machine)
POLL = 0.001  # wait between passes while the killed are still dying
DEAD_ROOT_LIMIT = 100000  # entry visits to clean one dead host's root

ROOT_PREFIX = b"execute-code-private-"
MARKER = b".execute-code-owner"
SPILL_PREFIX = b"spill-"
MARKER_MAX = 4096

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def parse_line(line):
    """One line (bytes, no newline) as (op, value), or None if malformed."""
    if not line:
        return None
    op, rest = line[:1], line[1:]
    if op in (b"+", b"-", b"!"):
        if not rest or len(rest) > 10 or not rest.isdigit():
            return None
        sid = int(rest)
        if sid <= 1:  # init's session is never ours
            return None
        return op, sid
    if op == b"r":
        if not rest or len(rest) % 2 or rest != rest.lower():
            return None
        try:
            root = bytes.fromhex(rest.decode("ascii"))
        except ValueError:
            return None
        if not root.startswith(b"/") or os.path.normpath(root) != root or b"\0" in root:
            return None
        return op, root
    if op == b"q" and not rest:
        return op, None
    return None


# --- the session sweep ---------------------------------------------------


def read_stat(pid):
    """(pgrp, session, start time, zombie) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb", buffering=0) as f:
            b = f.read(1024)
    except OSError:
        return None
    i = b.rfind(b")")
    if i < 0:
        return None
    f = b[i + 1 :].split()
    if len(f) < 20:
        return None
    try:
        return int(f[2]), int(f[3]), int(f[19]), f[0] in (b"Z", b"X")
    except ValueError:
        return None


def is_member(st, ids, groups):
    return st[1] in ids or (groups and st[0] in ids)


def kill(pid, seen, ids, groups):
    """SIGKILL pid through a pidfd, if it is still the process seen."""
    try:
        pfd = os.pidfd_open(pid)
    except OSError:
        return False  # gone already
    try:
        now = read_stat(pid)
        if now is None or now[2] != seen[2] or not is_member(now, ids, groups):
            return False
        _signal.pidfd_send_signal(pfd, _signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(pfd)


def kill_sessions(ids, groups, bound):
    """Kill every process of the sessions ids (and groups, with groups)
    until a pass finds none, or, once one was seen, two passes in a row
    see nothing new; or until bound has passed and MIN_PASSES were made.
    A member seen as a zombie for the first time counts as news: it may
    have forked just before it died."""
    ids = set(ids)
    if not ids:
        return
    if groups:
        for i in ids:
            try:
                os.killpg(i, _signal.SIGKILL)
            except OSError:
                pass
    me = os.getpid()
    dying, zombies = {}, {}
    deadline = time.monotonic() + bound
    quiet, need, passes = 0, 1, 0
    while True:
        live = killed = fresh = 0
        try:
            names = os.listdir("/proc")
        except OSError:
            return
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            if pid == me:
                continue
            st = read_stat(pid)
            if st is None or not is_member(st, ids, groups):
                continue
            if st[3]:
                # A leader's own zombie (it pins the id) is no news.
                if pid not in ids and zombies.get(pid) != st[2]:
                    zombies[pid] = st[2]
                    fresh += 1
                continue
            live += 1
            if dying.get(pid) == st[2]:
                continue  # killed by an earlier pass, not dead yet
            if kill(pid, st, ids, groups):
                dying[pid] = st[2]
                killed += 1
        passes += 1
        if live == 0 and fresh == 0:
            quiet += 1
            if quiet >= need:
                return
        else:
            quiet, need = 0, 2
        if passes >= MIN_PASSES and time.monotonic() >= deadline:
            return
        if live and not killed:
            time.sleep(POLL)  # only the dying are left


# --- the dead host's staging roots ---------------------------------------


def check_stat(st, want_dir):
    """The type, mode and owner a private object must have."""
    import stat as S

    if want_dir:
        ok, mode = S.S_ISDIR(st.st_mode), 0o700
    else:
        ok, mode = S.S_ISREG(st.st_mode), 0o600
    return ok and S.S_IMODE(st.st_mode) == mode and st.st_uid == os.geteuid()


def marker_owner(dirfd):
    """The pid the owner marker in dirfd names, or None. The marker must
    be the same regular 0600 file, ours, before and after its open."""
    try:
        before = os.stat(MARKER, dir_fd=dirfd, follow_symlinks=False)
        if not check_stat(before, False):
            return None
        fd = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        return None
    try:
        after = os.fstat(fd)
        if not check_stat(after, False) or (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
            return None
        b = os.read(fd, MARKER_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(b) > MARKER_MAX:
        return None
    parts = b.strip().split(b"\n")
    if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    if pid <= 0 or pid > 0x7FFFFFFF:
        return None
    return pid


def remove_at(parent, name, budget):
    """Remove the tree name under the directory fd parent, post-order,
    never following a link, spending visits from budget (a one-element
    list). Returns whether it finished."""
    stack = [(parent, name, None)]
    try:
        while stack:
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            p, n, dfd = stack.pop()
            if dfd is not None:  # every child was visited: the rmdir
                os.close(dfd)
                try:
                    os.rmdir(n, dir_fd=p)
                except OSError:
                    pass
                continue
            try:
                st = os.stat(n, dir_fd=p, follow_symlinks=False)
            except OSError:
                continue
            import stat as S

            if not S.S_ISDIR(st.st_mode):
                try:
                    os.unlink(n, dir_fd=p)
                except OSError:
                    pass
                continue
            try:
                fd = os.open(n, DIR_FLAGS, dir_fd=p)
            except OSError:
                try:
                    os.rmdir(n, dir_fd=p)
                except OSError:
                    pass
                continue
            stack.append((p, n, fd))
            try:
                children = os.listdir(fd)
            except OSError:
                children = []
            for c in children:
                stack.append((fd, os.fsencode(c), None))
        return True
    finally:
        for _, _, dfd in stack:
            if dfd is not None:
                os.close(dfd)


def exists(dirfd, name):
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        return True
    except OSError:
        return False


def is_spill(dirfd, name):
    import stat as S

    if not name.startswith(SPILL_PREFIX):
        return False
    try:
        return S.S_ISREG(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def remove_dead_root(root, host, limit):
    """Remove what the dead host left in root, spills excepted, and the
    root with its marker once nothing else is left. root must be a 0700
    directory of ours named execute-code-private-*, whose marker names host;
    anything else is left untouched. Returns "gone", "kept" or "refused"."""
    base = os.path.basename(root)
    if not root.startswith(b"/") or os.path.normpath(root) != root or not base.startswith(ROOT_PREFIX):
        return "refused"
    try:
        parent = os.open(os.path.dirname(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return "refused"
    try:
        try:
            fd = os.open(base, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return "gone"
        except OSError:
            return "refused"  # a link or a file where the root was
        try:
            if not check_stat(os.fstat(fd), True) or marker_owner(fd) != host:
                return "refused"
            budget, kept = [limit], 0
            # The listing is read as it goes, so a planted million names
            # are never held at once.
            with os.scandir(fd) as it:
                for entry in it:
                    if budget[0] <= 0:
                        kept += 1
                        break
                    name = os.fsencode(entry.name)
                    if name == MARKER:
                        continue
                    if is_spill(fd, name):
                        kept += 1
                        continue
                    if not remove_at(fd, name, budget) or exists(fd, name):
                        kept += 1
            if kept or sorted(os.listdir(fd))[:2] != [os.fsdecode(MARKER)]:
                return "kept"
            os.unlink(MARKER, dir_fd=fd)
            os.rmdir(base, dir_fd=parent)  # fails harmlessly if anything appeared
            return "gone"
        except OSError:
            return "kept"
        finally:
            os.close(fd)
    finally:
        os.close(parent)


# --- the guard -----------------------------------------------------------


def main():
    # Hang-ups and interrupts are the host's business; the guard ends when
    # the host's end of the pipe does.
    for s in (_signal.SIGINT, _signal.SIGHUP, _signal.SIGPIPE):
        _signal.signal(s, _signal.SIG_IGN)
    host = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
    sessions, roots, quit, partial = set(), [], False, b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        partial += chunk
        ended = []
        while b"\n" in partial:
            line, partial = partial.split(b"\n", 1)
            parsed = parse_line(line)
            if parsed is None:
                continue
            op, v = parsed
            if op == b"+":
                # A reused id means the old session is empty: the kernel
                # keeps an id while any process has it as its session.
                sessions.add(v)
            elif op == b"-":
                sessions.discard(v)
            elif op == b"!":
                sessions.discard(v)
                ended.append(v)
            elif op == b"r":
                if v not in roots:
                    roots.append(v)
            else:
                quit = True
        if ended:
            kill_sessions(ended, False, ENDED_BOUND)
        if not chunk:
            break
    kill_sessions(sessions, True, SWEEP_BOUND)
    # Only a host that died leaves its roots to the guard: one that closed
    # cleanly removed what it had to, and what it kept (spills) stays.
    if not quit and host > 1:
        for root in roots:
            remove_dead_root(root, host, DEAD_ROOT_LIMIT)
    return 0


if __name__ == "__main__":
    # Its work is done and it holds nothing to flush: ending without the
    # interpreter's teardown lets a host's Close, which waits for the
    # guard, return sooner.
    os._exit(main())
