"""scripts/measure/oracle/phased_trace.py -- random valid traces in phases,
for the oracle's validation: the life cycle the uniform random traces
(random_trace.py) lack.

Usage: phased_trace.py OUT SEED [PHASES]   (default 8 phases)

Each phase starts 1-5 worker threads (ids 1.. reused from phase to phase:
new threads on recycled stacks and arenas), builds a working set of
1,000-4,000 allocations from any thread (malloc 80%, calloc 20%; sizes
log-uniform, 70% 16 B-1 KiB, 25% 1-64 KiB, 5% 64 KiB-1 MiB; 30% of the
time a random block of the burst is freed at once), then frees all of it
but a fraction drawn from 0, 1, 5 and 20% that lives to the end, from any
thread, and stops its workers.  Marks after the build-up, the frees and the
joins; then, at random, an idle of 50 ms, 200 ms or 1 s and a
malloc_trim(0).  Times advance 1 us per call.  Python's random with SEED,
so a seed gives the same trace on any machine.
"""
import heapq
import random
import sys

from random_trace import log_uniform

# (upper bound of the class draw, smallest, largest size): 70% small,
# 25% medium, 5% large up to 1 MiB.
SIZE_CLASSES = ((0.7, 16, 1024), (0.95, 1024, 65536), (1.0, 65536, 1 << 20))


def size(rng):
    c = rng.random()
    for bound, lo, hi in SIZE_CLASSES:
        if c < bound:
            break
    return log_uniform(rng, lo, hi)


class Trace:
    def __init__(self, seed, phases):
        self.rng = random.Random(seed)
        self.lines = ["allocsim-trace 1",
                      "#@ source=phased_trace.py seed=%d phases=%d"
                      % (seed, phases), "0 0 mark start"]
        self.t = 0
        self.free_ids = []
        self.next_id = 0

    def emit(self, thread, what):
        self.t += 1000
        self.lines.append("%d %d %s" % (self.t, thread, what))

    def alloc(self, thread):
        oid = heapq.heappop(self.free_ids) if self.free_ids else self.next_id
        if oid == self.next_id:
            self.next_id += 1
        op = "malloc" if self.rng.random() < 0.8 else "calloc"
        self.emit(thread, "%s %d %d" % (op, oid, size(self.rng)))
        return oid

    def free(self, thread, oid):
        self.emit(thread, "free %d" % oid)
        heapq.heappush(self.free_ids, oid)

    def phase(self, p):
        rng = self.rng
        workers = rng.randrange(1, 6)
        for th in range(1, workers + 1):
            self.emit(th, "thread_start")
        burst = []
        for _ in range(rng.randrange(1000, 4000)):
            burst.append(self.alloc(rng.randrange(0, workers + 1)))
            if rng.random() < 0.3:
                k = rng.randrange(len(burst))
                oid = burst[k]
                burst[k] = burst[-1]
                burst.pop()
                self.free(rng.randrange(0, workers + 1), oid)
        self.emit(0, "mark p%d_built" % p)
        rng.shuffle(burst)
        kept = rng.choice([0.0, 0.01, 0.05, 0.2])
        for oid in burst:
            if rng.random() >= kept:
                self.free(rng.randrange(0, workers + 1), oid)
        self.emit(0, "mark p%d_freed" % p)
        for th in range(1, workers + 1):
            self.emit(th, "thread_exit")
        self.emit(0, "mark p%d_joined" % p)
        if rng.random() < 0.5:
            idle = rng.choice([50, 200, 1000]) * 1000000
            self.emit(0, "idle %d" % idle)
            self.t += idle
            self.emit(0, "mark p%d_idle" % p)
        if rng.random() < 0.3:
            self.emit(0, "trim 0")
            self.emit(0, "mark p%d_trim" % p)


def main():
    out, seed = sys.argv[1], int(sys.argv[2])
    phases = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    trace = Trace(seed, phases)
    for p in range(phases):
        trace.phase(p)
    with open(out, "w") as f:
        f.write("\n".join(trace.lines) + "\n")


if __name__ == "__main__":
    main()
