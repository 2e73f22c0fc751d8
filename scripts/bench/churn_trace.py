#!/usr/bin/env python3
"""scripts/bench/churn_trace.py -- a churn trace for replay benchmarks with a
fixed live set: LIVE mallocs, then STEPS times free a random live object and
malloc a new one under the same id (ids recycled, as the trace writers do).
Sizes: 90% 16..1024 bytes, 10% 1025..16384; seed 1, so the same trace on
every machine.  Text on stdout; convert it and replay it with bench_replay:

  scripts/bench/churn_trace.py 2500000 50000 > /tmp/c.trace
  build/cli/allocsim convert /tmp/c.trace /tmp/c.astrace --format binary
  build/tests/bench_replay 5050000 tcmalloc /tmp/c.astrace
"""
import random
import sys


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2500000
    live = int(sys.argv[2]) if len(sys.argv) > 2 else 50000
    r = random.Random(1)
    w = sys.stdout.write

    def size():
        if r.random() < 0.9:
            return r.randint(16, 1024)
        return r.randint(1025, 16384)

    w("allocsim-trace 1\n")
    t = 0
    for i in range(live):
        t += 1
        w("%d 0 malloc %d %d\n" % (t, i, size()))
    for _ in range(steps):
        k = r.randrange(live)
        t += 1
        w("%d 0 free %d\n" % (t, k))
        t += 1
        w("%d 0 malloc %d %d\n" % (t, k, size()))


if __name__ == "__main__":
    main()
