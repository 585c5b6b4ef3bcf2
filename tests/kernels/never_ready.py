"""A kernel that starts but never sends its ready frame."""

import time

time.sleep(60)
