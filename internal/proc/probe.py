# Run once per interpreter, unconfined, to learn what it reads: where its
# trees are, and every shared object it maps once it has loaded what the
# bootstrap, the sandbox, the helper module and the kernel runner import,
# plus every extension module of lib-dynload (loaded with dlopen, not
# imported, so no module's init runs), whose libraries a script's first
# `import sqlite3` or `import ssl` would need.
import os, sys, sysconfig
import ctypes, struct, select, time, io, binascii, builtins, stat, json, threading, linecache, traceback
import _thread, _signal, _operator, _weakref, _json
import concurrent.futures
try:
    import _sha2
except ImportError:
    import _sha256

paths = sysconfig.get_paths()
dynload = set()
for p in sys.path:
    if os.path.basename(p) == "lib-dynload" and os.path.isdir(p):
        dynload.add(p)
for d in dynload:
    for name in sorted(os.listdir(d)):
        if name.endswith(".so"):
            try:
                ctypes.CDLL(os.path.join(d, name), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
            except OSError:
                pass

mapped = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6:
            p = parts[5].rstrip("\n")
            if p.startswith("/") and not p.endswith(" (deleted)"):
                mapped.add(p)

prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
out = {
    "executable": sys.executable,
    "prefixes": sorted(prefixes),
    "trees": sorted({paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}),
    "path": [p for p in sys.path if p],
    "mapped": sorted(mapped),
}
sys.stdout.write("\x1eexecute-code-probe\t" + json.dumps(out) + "\n")
