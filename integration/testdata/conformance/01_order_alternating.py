# known: out 0
# known: err 199
import sys
for i in range(200):
    stream = sys.stdout if i % 2 == 0 else sys.stderr
    print(("out " if i % 2 == 0 else "err ") + str(i), file=stream)
text("done")
