# known: from the child
# known: child's stderr
import subprocess, sys
subprocess.run([sys.executable, "-c", "print('from the child')"], check=True)
subprocess.run([sys.executable, "-c", "import sys; print(\"child's stderr\", file=sys.stderr)"], check=True)
print("after the children")
