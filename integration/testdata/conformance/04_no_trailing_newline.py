# known: no newline at the end
import sys
sys.stdout.write("no newline at the end")
