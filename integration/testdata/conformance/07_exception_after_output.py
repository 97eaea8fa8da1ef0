# known: before the error
# known: ValueError: boom
print("before the error")
raise ValueError("boom")
