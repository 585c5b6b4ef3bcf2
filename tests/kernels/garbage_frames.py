"""A kernel that answers with bytes that are not a valid frame, then hangs."""

import os
import sys
import time

os.write(int(sys.argv[2]), b"\xff\xff\xff\xffnot a frame at all")
time.sleep(60)
