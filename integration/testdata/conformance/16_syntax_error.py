# known: SyntaxError
def broken(:
    pass
