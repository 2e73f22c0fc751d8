"""scripts/measure/oracle/random_trace.py -- random valid traces for the
oracle's validation: calls no program made, so that neither a model nor the
oracle can have been shaped to them.

Usage: random_trace.py OUT SEED [EVENTS] [THREADS]
  (defaults: 20000 events, 1 thread)

Every call is valid (frees and reallocs of live objects only; ids dense and
recycled lowest first, as traces/event.h requires).  Per call: 60% an
allocation (malloc 70%, calloc 15%, memalign 10% with alignments 16-4096,
realloc 5%), else a free of a random live object -- from any thread, so
threaded traces free across threads; sizes log-uniform within a class
drawn as 75% small (16 B-1 KiB), 20% medium (1-64 KiB), 5% large
(64 KiB-2 MiB); at most 4000 live objects.  A mark every EVENTS/10 calls,
malloc_trim(0) with probability 1/4000, threads started at time 0 and
never stopped.  Times advance 1 us per call.  Python's random with SEED,
so a seed gives the same trace on any machine.
"""
import heapq
import math
import random
import sys


def log_uniform(rng, lo, hi):
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def size(rng):
    c = rng.random()
    if c < 0.75:
        return log_uniform(rng, 16, 1024)
    if c < 0.95:
        return log_uniform(rng, 1024, 65536)
    return log_uniform(rng, 65536, 2 << 20)


def main():
    out, seed = sys.argv[1], int(sys.argv[2])
    events = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    rng = random.Random(seed)
    free_ids, next_id = [], 0
    live = {}          # id -> size
    live_list = []     # ids, for picking one at random
    where = {}         # id -> index in live_list
    lines = ["allocsim-trace 1",
             "#@ source=random_trace.py seed=%d events=%d threads=%d"
             % (seed, events, threads)]
    t = 0
    for th in range(1, threads):
        lines.append("%d %d thread_start" % (t, th))
    lines.append("%d 0 mark start" % t)
    marks = 0
    for i in range(1, events + 1):
        t += 1000
        th = rng.randrange(threads)
        if live_list and (len(live_list) >= 4000 or rng.random() >= 0.6):
            k = rng.randrange(len(live_list))
            oid = live_list[k]
            if rng.random() < 0.125:  # a realloc of it instead
                n = size(rng)
                lines.append("%d %d realloc %d %d" % (t, th, oid, n))
                live[oid] = n
                continue
            last = live_list.pop()
            if last != oid:
                live_list[k] = last
                where[last] = k
            del where[oid], live[oid]
            heapq.heappush(free_ids, oid)
            lines.append("%d %d free %d" % (t, th, oid))
        else:
            oid = heapq.heappop(free_ids) if free_ids else next_id
            if oid == next_id:
                next_id += 1
            n = size(rng)
            c = rng.random()
            if c < 0.7:
                lines.append("%d %d malloc %d %d" % (t, th, oid, n))
            elif c < 0.85:
                lines.append("%d %d calloc %d %d" % (t, th, oid, n))
            else:
                align = 16 << rng.randrange(9)
                lines.append("%d %d memalign %d %d %d" % (t, th, oid, align, n))
            live[oid] = n
            where[oid] = len(live_list)
            live_list.append(oid)
        if rng.random() < 1 / 4000:
            lines.append("%d 0 trim 0" % t)
        if i % max(1, events // 10) == 0:
            marks += 1
            lines.append("%d 0 mark m%d" % (t, marks))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
