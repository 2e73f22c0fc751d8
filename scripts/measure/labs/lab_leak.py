#!/usr/bin/env python3
"""scripts/measure/labs/lab_leak.py -- lab 7 of the allocator course notes
(section 20): a leak in C that tracemalloc cannot see.

The notes leak a NumPy array from a C extension in a loop and show that
tracemalloc reports nothing while a native profiler shows everything.
Here the "extension" is libc's malloc called through ctypes, as any C
extension's own allocations are: --rounds rounds of --blocks blocks of
--size bytes, each written (ctypes.memset) and never freed.  tracemalloc
traces only the Python allocator domains (PyMem_*, PyObject_*), so it
sees the list of pointers and nothing of the blocks; `allocsim capture`
interposes malloc itself and records them all.

At the marks start and leak_<MiB> (after each round) the program reads its
RSS from /proc/self/smaps_rollup and tracemalloc's current traced bytes
(written as the provenance `tracemalloc_kib=MARK:KIB ...`), and, when it
runs under `allocsim capture`, calls allocsim_mark so the capture has the
same marks.  With --out it writes a measured-run file (survivors.py's
format, with no workload: no synthetic workload replays it); the
repository's capture of it (data/captures/lab-leak.astrace) is what
`allocsim lab leak` replays.

Usage: lab_leak.py [--out FILE] [--rounds 5] [--blocks 160] [--size 65536]
"""
import argparse
import ctypes
import os
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]
from survivors import read_rss, run_meta, write_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=160)
    ap.add_argument("--size", type=int, default=65536)
    a = ap.parse_args()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    capture_mark = getattr(libc, "allocsim_mark", None)  # only under capture
    if capture_mark is not None:
        capture_mark.argtypes = [ctypes.c_char_p]
    leaked = [None] * (a.rounds * a.blocks)  # the pointers, made up front
    tracemalloc.start()
    samples, traced = [], []
    t0 = time.monotonic_ns()

    def mark(label):
        samples.append((time.monotonic_ns() - t0, label, read_rss()))
        traced.append(f"{label}:{tracemalloc.get_traced_memory()[0] // 1024}")
        if capture_mark is not None:
            capture_mark(label.encode())

    mark("start")
    for r in range(a.rounds):
        for i in range(a.blocks):
            p = libc.malloc(a.size)
            if not p:
                raise SystemExit("lab_leak.py: malloc failed")
            ctypes.memset(p, 0xA5, a.size)
            leaked[r * a.blocks + i] = p
        mark(f"leak_{(r + 1) * a.blocks * a.size >> 20}")
    tracemalloc.stop()
    if a.out:
        # No workload: the lab replays the capture of this program, and a
        # measured run naming no workload is not replayed by compare.
        meta = [kv for kv in run_meta("") if kv[0] != "workload"] + [
            ("baseline_rss_bytes", str(samples[0][2])),
            ("tracemalloc_kib", " ".join(traced)),
        ]
        write_run(a.out, meta, samples)
    for label, kib in (t.split(":") for t in traced):
        print(f"{label:10} tracemalloc {int(kib):8d} KiB", file=sys.stderr)


if __name__ == "__main__":
    main()
