# known: a1
# known: c3
import sys
sys.stdout.write("a1\n")
sys.stderr.write("b2\n")
sys.stdout.write("c3\n")
sys.stderr.write("d4\n")
