# known: (script produced no output)
x = 41
