# known: line 0
# known: line 99999
for i in range(100000):
    print("line %d" % i)
text("large")
