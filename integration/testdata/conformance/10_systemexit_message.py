import sys
sys.exit("a message to exit with")
