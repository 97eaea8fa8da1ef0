# Says every host secret it can find through every channel the host
# reports: text(), notify(), stdout, stderr, a spilled flood, and an
# exception's message and traceback. It writes the list to secrets.json in
# its working directory, where the test reads it: the test cannot know
# the paths and token in advance.
import json, os, sys, time
import exec_tools as lt

HEAD = 1600  # 40 % of max_output_bytes = 4000: where the head is cut
B = lt._BRIDGE
helpers = lt.__file__
workspace = os.path.dirname(helpers)
# A kernel's workspace lies in its home, which holds its cells' bridges;
# a per-call workspace lies in the staging root itself.
root = workspace
while not os.path.basename(root).startswith("execute-code-private-"):
    root = os.path.dirname(root)
secrets = [B.token, B.dir, os.path.dirname(B.dir), helpers, workspace, os.path.dirname(workspace), root]
if sys.argv[0]:  # a session cell's is empty
    secrets.append(os.path.abspath(sys.argv[0]))
secrets += [os.path.realpath(s) for s in secrets if s.startswith("/")]
secrets = sorted(set(secrets), key=len, reverse=True)
with open("secrets.json", "w") as f:
    json.dump(secrets, f)

out = sys.stdout
# The cut between the kept head and the rest falls inside a path.
out.write("h" * (HEAD - 7) + helpers + "\n")
out.flush()
# A path split across two reads (two stream frames in a kernel) ...
half = len(B.dir) // 2
out.write("reads " + B.dir[:half])
out.flush()
time.sleep(0.05)
out.write(B.dir[half:] + "\n")
out.flush()
# ... and across stdout and stderr, which share one pipe in both modes.
out.write("streams " + root[:half])
out.flush()
sys.stderr.write(root[half:] + "\n")
sys.stderr.flush()

for s in secrets:
    print("print", s)
    print("stderr", s, file=sys.stderr)
    notify("notify " + s)
    text("text " + s)
# A notify() message over its 4 KiB cap, cut inside the token.
notify("n" * (4096 - 10) + B.token)
print("filler " * 700)  # well past max_output_bytes: the output spills
print("tail", B.token, helpers)

try:
    read("missing-" + B.token)
except ToolError as e:
    # Raised from inside exec_tools: its frames name the helpers' file.
    e.args = ("; ".join(secrets) + " \x1b[31mred\x1b[0m\x07\x00\x08 bell",)
    raise
