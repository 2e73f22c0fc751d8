# scripts/measure/capture_programs/py_threads.py -- a threaded CPython
# program: 4 worker threads each build a list of 5,000 dicts holding
# strings, then drop it; the main thread waits.  Marks: start, peak (all
# workers done building, lists still held), after (lists dropped).
import threading

from allocsim import mark

barrier = threading.Barrier(5)
results = [None] * 4


def work(k):
    rows = [{"id": i, "name": "row-%d-%d" % (k, i), "pad": "p" * (i % 200)}
            for i in range(5000)]
    results[k] = rows
    barrier.wait()  # the main thread marks the peak
    barrier.wait()  # and lets the lists go
    results[k] = None


mark("start")
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
barrier.wait()
mark("peak")
barrier.wait()
for t in threads:
    t.join()
mark("after")
