# known: caught:
try:
    read("missing.txt")
except Exception as e:
    print("caught:", type(e).__name__)
