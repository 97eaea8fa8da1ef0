# known: worker 0 done
# known: worker 2 done
import threading
lines = []
def work(n):
    lines.append("worker %d done" % n)
ts = [threading.Thread(target=work, args=(n,)) for n in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for line in sorted(lines):
    print(line)
