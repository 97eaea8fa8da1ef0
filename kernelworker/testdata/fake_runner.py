# A stand-in for runner.py that speaks just enough of the kernel protocol
# for fault injection: each eval's code runs with raw(b) (write bytes to the
# control pipe as they are), frame(**fields) (write one well-formed frame),
# out(text) (a stdout stream frame of the open cell) and gate(path) (wait
# until path exists) in scope, so a test can make the runner break the
# protocol in any way it likes. Output is not captured; exceptions become
# exception frames.
import base64
import json
import os
import sys

ctl = os.dup(1)
os.set_inheritable(ctl, False)
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)


def raw(b):
    view = memoryview(b)
    while view:
        view = view[os.write(ctl, view):]


def frame(**fields):
    fields.setdefault("v", 1)
    raw(b"\x1elemon-python\t" + json.dumps(fields, separators=(",", ":")).encode() + b"\n")


def gate(path):
    import time

    while not os.path.exists(path):
        time.sleep(0.005)


def out(text):
    data = base64.b64encode(text.encode()).decode()
    frame(type="stream", id=namespace["cell"], stream="stdout", data=data)


namespace = {"__name__": "__main__", "raw": raw, "frame": frame, "gate": gate, "out": out, "os": os}
requests = os.fdopen(0, "rb")
for line in requests:
    req = json.loads(line)
    if req["type"] == "init":
        os.chdir(req["cwd"])
        frame(type="ready", pid=os.getpid())
    elif req["type"] == "eval":
        namespace["cell"] = req["id"]
        frame(type="started", id=req["id"])
        try:
            exec(compile(req["code"], "<cell>", "exec"), namespace)
        except BaseException as exc:
            frame(type="exception", id=req["id"], kind="error", name=type(exc).__name__, message=str(exc))
        frame(type="done", id=req["id"])
    elif req["type"] == "shutdown":
        frame(type="bye")
        sys.exit(0)
