# scripts/measure/capture_programs/py_trim.py -- a CPython program that
# gives memory back the way the webworker study recommends, through
# ctypes.CDLL("libc.so.6").malloc_trim(0) (libc's own handle: the call a
# preloaded recorder misses unless it wraps dlsym).  A load spike of
# 15,000 strings of 600-4,000 bytes, 2% kept, then a trim.
import ctypes
import random

from allocsim import mark

rng = random.Random(1)
mark("start")
spike = ["x" * rng.randint(600, 4000) for _ in range(15000)]
mark("peak")
kept = spike[::50]
del spike
mark("after_free")
ctypes.CDLL("libc.so.6").malloc_trim(0)
mark("after_trim")
print(len(kept))
