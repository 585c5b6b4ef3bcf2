"""A kernel that starts but never sends its ready frame (writes its pid where asked)."""

import os
import time

if os.environ.get("KERNEL_PID_FILE"):
    with open(os.environ["KERNEL_PID_FILE"], "w") as handle:
        handle.write(str(os.getpid()))
time.sleep(60)
