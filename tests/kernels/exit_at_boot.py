"""A kernel that dies before it is ready, after saying why on stderr."""

import sys

print("this kernel refuses to start", file=sys.stderr)
sys.exit(7)
