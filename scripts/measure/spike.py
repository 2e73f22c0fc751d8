#!/usr/bin/env python3
"""scripts/measure/spike.py -- the load-spike study's experiment,
run for real.

Builds COUNT (str, float) tuples whose string lengths come from the shared
splitmix64 rule (traces/wl_spike.c implements the same rule, so the simulated
workload allocates exactly the sizes measured here), keeps every KEEP-th
tuple, frees the rest, runs gc.collect(), then malloc_trim(0) through ctypes.
At each mark it reads the exact RSS from /proc/self/smaps_rollup (Linux
6.1.170: VmRSS under-reports by up to 64 page faults per thread,
mm/memory.c:198; smaps_rollup walks the page tables, fs/proc/task_mmu.c:768)
and writes an allocsim measured-run file:

    allocsim-trace 1
    #@ kind=measured
    #@ workload=spike --count 160000 ... (exact `allocsim run` arguments)
    #@ ...provenance...
    T 0 mark start
    T 0 rss BYTES
    ...

Single-threaded, the build is the study's list comprehension.  With --threads
T > 1 the main thread preallocates `data = [None] * count` and T threads fill
contiguous index ranges (thread k: [k*count//T, (k+1)*count//T)); traces/
wl_spike.c replays the same structure.  All threads wait at a barrier before
building so that all of them are alive at once, as the simulation assumes.

The splitmix64 rule (Steele, Lea, Flood 2014; the constants are those of
Vigna's splitmix64.c): the tuple with index i (0-based) draws
    z = mix64(seed + (i + 1) * 0x9E3779B97F4A7C15 mod 2^64)
    length = min + z % (max - min + 1),   value = (z >> 11) * 2^-53
Random access by index means the threaded split draws the same sizes.

Usage: spike.py --out FILE [--count N --min A --max B --keep-every K
                            --seed S --threads T]
The MALLOC_* environment variables are read by glibc itself; this script only
records them.  Run under `nice`: the machine is shared.
"""

import argparse
import ctypes
import gc
import os
import platform
import sys
import threading
import time

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
INV53 = 1.0 / 9007199254740992.0  # 2^-53


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def rss_bytes():
    """Exact resident set size in bytes (smaps_rollup 'Rss:' line, in kB)."""
    with open("/proc/self/smaps_rollup", "rb") as f:
        for line in f:
            if line.startswith(b"Rss:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no Rss: line in /proc/self/smaps_rollup")


# env name -> glibc model knob (glibc 2.36 elf/dl-tunables.list env_alias)
GLIBC_ENV = [
    ("MALLOC_ARENA_MAX", "arena_max"),
    ("MALLOC_ARENA_TEST", "arena_test"),
    ("MALLOC_MMAP_THRESHOLD_", "mmap_threshold"),
    ("MALLOC_TRIM_THRESHOLD_", "trim_threshold"),
    ("MALLOC_TOP_PAD_", "top_pad"),
]


class MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (malloc.h, glibc >= 2.33)."""
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


def preload_meta():
    """The libc spec, unless LD_PRELOAD put another allocator in place: then
    the environment that chose it (env.LD_PRELOAD, env.MALLOC_CONF, the
    keys allocsim capture writes) and the CPU count, from which allocsim
    picks that allocator's model (models/env.c)."""
    pre = os.environ.get("LD_PRELOAD")
    if not pre:
        return [("libc", libc_spec())]
    meta = [("env.LD_PRELOAD", pre), ("ncpus", str(os.cpu_count()))]
    if "MALLOC_CONF" in os.environ:
        meta.append(("env.MALLOC_CONF", os.environ["MALLOC_CONF"]))
    return meta


def libc_spec():
    knobs = ["ncpus=%d" % os.cpu_count()]
    for env, knob in GLIBC_ENV:
        if env in os.environ:
            knobs.append("%s=%s" % (knob, os.environ[env]))
    return "glibc:" + ",".join(knobs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=160000)
    ap.add_argument("--min", type=int, default=600)
    ap.add_argument("--max", type=int, default=4000)
    ap.add_argument("--keep-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    count, lo, span, seed = a.count, a.min, a.max - a.min + 1, a.seed

    samples = []  # (t_ns, label, rss); appended to a preallocated-size list
    t0 = time.monotonic_ns()

    try:  # under `allocsim capture` the marks go into the capture too
        capture_mark = ctypes.CDLL(None).allocsim_mark
    except AttributeError:
        capture_mark = None

    def mark(label):
        if capture_mark is not None:
            capture_mark(label.encode())
        samples.append((time.monotonic_ns() - t0, label, rss_bytes()))

    def one(i):
        z = mix64((seed + (i + 1) * GAMMA) & MASK)
        return ("x" * (lo + z % span), (z >> 11) * INV53)

    gc.collect()
    # The interpreter's own live mmapped chunks count against M_MMAP_MAX
    # (65536) like the workload's, which the simulation starts without;
    # recorded so that the docs can account for it (glibc-validation.md).
    libc.mallinfo2.restype = MallInfo2
    mi_start = libc.mallinfo2()
    mark("start")
    build_start = time.monotonic_ns()
    if a.threads == 1:
        # The study's shape: one list comprehension, appends grow the list.
        data = [one(i) for i in range(count)]
    else:
        data = [None] * count
        barrier = threading.Barrier(a.threads)

        def worker(k):
            lo_i, hi_i = k * count // a.threads, (k + 1) * count // a.threads
            barrier.wait()
            for i in range(lo_i, hi_i):
                data[i] = one(i)

        threads = [threading.Thread(target=worker, args=(k,))
                   for k in range(a.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    build_ns = time.monotonic_ns() - build_start
    mark("peak")
    free_start = time.monotonic_ns()
    survivors = data[::a.keep_every]
    del data
    gc.collect()
    free_ns = time.monotonic_ns() - free_start
    mark("after_free")
    trim_start = time.monotonic_ns()
    libc.malloc_trim(0)
    trim_ns = time.monotonic_ns() - trim_start
    mark("after_trim")
    assert len(survivors) == (count + a.keep_every - 1) // a.keep_every

    env = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items())
                   if k.startswith(("MALLOC_", "TCMALLOC_"))
                   or k == "GLIBC_TUNABLES")
    # --python names the CPython whose requests traces/wl_spike.c emits
    # (3.11 or 3.14; other versions are refused there, not guessed).
    workload = ("spike --count %d --min %d --max %d --keep-every %d "
                "--seed %d --threads %d --python %d.%d"
                % (count, a.min, a.max, a.keep_every, seed, a.threads,
                   sys.version_info[0], sys.version_info[1]))
    meta = [
        ("kind", "measured"),
        ("workload", workload),
        ("model", "cpython:version=%d.%d" % sys.version_info[:2]),
    ] + preload_meta() + [
        ("command", " ".join([os.path.basename(sys.executable)] + sys.argv)),
        ("machine", "%s %s, %d cpus" % (platform.node(), platform.machine(),
                                        os.cpu_count())),
        ("kernel", platform.release()),
        ("page_size", str(os.sysconf("SC_PAGE_SIZE"))),
        ("python", platform.python_version()),
        ("glibc", "-".join(platform.libc_ver())),
        # the glibc model's version knob reads it (models/glibc.c)
        ("glibc_version", platform.libc_ver()[1]),
        ("malloc_env", env if env else "(none)"),
        ("thp", open("/sys/kernel/mm/transparent_hugepage/enabled")
         .read().strip()),
        ("rss_source", "/proc/self/smaps_rollup Rss"),
        ("baseline_rss_bytes", str(samples[0][2])),
        ("mmapped_chunks_at_start", str(mi_start.hblks)),
        ("mmapped_bytes_at_start", str(mi_start.hblkhd)),
        ("build_ms", "%.1f" % (build_ns / 1e6)),
        ("free_ms", "%.1f" % (free_ns / 1e6)),
        ("trim_ms", "%.1f" % (trim_ns / 1e6)),
    ]
    with open(a.out, "w") as f:
        f.write("allocsim-trace 1\n")
        for k, v in meta:
            f.write("#@ %s=%s\n" % (k, v))
        for t_ns, label, rss in samples:
            f.write("%d 0 mark %s\n%d 0 rss %d\n" % (t_ns, label, t_ns, rss))
    for t_ns, label, rss in samples:
        print("%-11s %8.1f MiB" % (label, rss / 2**20))


if __name__ == "__main__":
    main()
