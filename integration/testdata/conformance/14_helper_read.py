# known: the file's text
text(read("data.txt"))
