notify("halfway")
text("first block")
text("second block")
