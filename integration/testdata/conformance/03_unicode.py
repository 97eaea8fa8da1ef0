# known: héllo wörld ✓ 日本語 🎉
print("héllo wörld ✓ 日本語 🎉")
print("x" + "é" * 3000)
text("ünïcode ✓")
