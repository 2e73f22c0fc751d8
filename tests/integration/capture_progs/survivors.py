# tests/integration/capture_progs/survivors.py -- a CPython program for the
# reference database and the capture overhead measurement: builds N small
# bytes objects and a dict of lists, keeps one in KEEP_EVERY, frees the
# rest.  Marks: start, peak, after_free, end.  Without capture the marks
# are no-ops.  Prints its peak RSS (ru_maxrss) and time to stderr.
import ctypes
import resource
import sys
import time

try:
    _mark = ctypes.CDLL(None).allocsim_mark
except AttributeError:
    _mark = None


def mark(label):
    if _mark is not None:
        _mark(label.encode())


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    keep_every = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    t0 = time.perf_counter()
    mark("start")
    objs = [bytes(64 + (i % 7)) for i in range(n)]
    table = {i: [i] * (i % 5) for i in range(n // 4)}
    mark("peak")
    kept = objs[::keep_every]
    del objs
    table.clear()
    mark("after_free")
    del kept
    mark("end")
    t1 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"survivors.py: n={n} time={t1 - t0:.3f}s maxrss={rss}KiB",
          file=sys.stderr)


main()
