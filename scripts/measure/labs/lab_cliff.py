#!/usr/bin/env python3
"""scripts/measure/labs/lab_cliff.py -- lab 2 of the allocator course notes
(section 20): find your 512-byte cliff.

"Reproduce section 14 with PYTHONMALLOC=pymalloc and PYTHONMALLOC=malloc.
Confirm the step appears in one column and not the other."  Run it once
under each (`allocsim lab cliff --measure` does).  For each object size S
from --min to --max in steps of 8 bytes, a tuple of k items whose
sys.getsizeof is S (one PyObject_Malloc of exactly S bytes: the GC header,
the tuple header and k pointers, Objects/tupleobject.c tuple_alloc; k is
well above the tuple free lists' 20):

  - RSS: --count tuples of size S held in a list made before `start`, the
    mark "<S>B" with RSS from /proc/self/smaps_rollup, then all dropped.
    The allocsim workload `lab-cliff` replays these requests.  After the
    RSS reading, pymalloc's blocks in use of S's size class (S rounded up
    to 16) less those at `start`, from sys._debugmallocstats: the
    provenance `blocks` (0 under PYTHONMALLOC=malloc, where pymalloc
    reports nothing).
  - Time: the least, over --passes passes, of the mean ns of one
    `t = tuple(src)` (a tuple made, the previous one freed) over
    --iterations iterations; written as the provenance `ns`.  The least
    rejects the other programs of a shared machine, which only ever add
    time.  The simulation has no per-allocator cost, so only the program
    measures this column.  Each column is one provenance line of
    MARK:NUMBER words (`ns=456B:84.4 464B:85.4 ...`, `blocks=...`).

Usage: lab_cliff.py --out FILE [--min 456] [--max 544] [--count 1000]
                    [--iterations 20000] [--passes 30]
"""
import argparse
import gc
import os
import sys
import time

# survivors.py sits beside this script in the labs directory CMake makes,
# and one directory up in the source tree.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]
from survivors import mallocstats, read_rss, run_meta, write_run  # noqa: E402


def tuple_items(size):
    """k such that sys.getsizeof of a k-tuple is size, or None."""
    base = sys.getsizeof(())
    item = sys.getsizeof((None,)) - base
    k, rem = divmod(size - base, item)
    return k if rem == 0 and k > 20 else None


def ns_per_tuple(src, iterations, passes):
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter_ns()
        for _ in range(iterations):
            t = tuple(src)  # noqa: F841 -- the allocation is the point
        best = min(best, (time.perf_counter_ns() - t0) / iterations)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--min", type=int, default=456)
    ap.add_argument("--max", type=int, default=544)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--passes", type=int, default=30)
    a = ap.parse_args()
    sizes = list(range(a.min, a.max + 1, 8))
    srcs = {}
    for s in sizes:
        k = tuple_items(s)
        if k is None:
            raise SystemExit(f"lab_cliff.py: no tuple of more than 20 items "
                             f"has sys.getsizeof {s} on this build")
        srcs[s] = [None] * k
    held = [None] * a.count
    samples = []
    gc.collect()
    t0 = time.monotonic_ns()

    def mark(label):
        samples.append((time.monotonic_ns() - t0, label, read_rss()))

    def blocks(size):
        return mallocstats()["inuse"].get((size + 15) // 16 * 16, 0)

    mark("start")
    at_start = {s: blocks(s) for s in sizes}
    pymalloc = []
    for s in sizes:
        src = srcs[s]
        for i in range(a.count):
            held[i] = tuple(src)
        mark(f"{s}B")
        pymalloc.append(f"{s}B:{blocks(s) - at_start[s]}")
        for i in range(a.count):
            held[i] = None
    timing = " ".join(
        f"{s}B:{ns_per_tuple(srcs[s], a.iterations, a.passes):.1f}"
        for s in sizes)
    workload = (f"lab-cliff --min {a.min} --max {a.max} --step 8 "
                f"--count {a.count}")
    meta = run_meta(workload) + [
        ("baseline_rss_bytes", str(samples[0][2])),
        ("timing", f"least of {a.passes} passes of {a.iterations} "
                   f"t = tuple(src), ns each"),
        ("blocks", " ".join(pymalloc)),
        ("ns", timing),
    ]
    write_run(a.out, meta, samples)


if __name__ == "__main__":
    main()
