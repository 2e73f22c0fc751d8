#!/usr/bin/env python3
"""scripts/measure/webworker.py -- the webworker study's threaded fake
web worker, run for real.

T worker threads serve requests from a shared counter.  Each request makes a
body (b"x" * n, n from the shared splitmix64 rule), builds a 200-item dict,
round-trips it through json, and with probability 0.3 (same rule) stores the
body in a shared LRU cache (an OrderedDict capped at CACHE_MB MiB of body
bytes).  Phase 1 serves REQUESTS requests; the main thread then shrinks the
cache to SHRINK_MB MiB and the same threads serve REQUESTS // 2 more and
exit.  traces/wl_webworker.c emits the allocation requests of exactly this
program (its header cites the CPython source for each) and draws the same
sizes: request i (0-based over both phases) uses splitmix64 outputs 3i,
3i+1, 3i+2 (see traces/wl_webworker.h).

Marks, each followed by the exact RSS from /proc/self/smaps_rollup:
  start         after gc.collect(), threads started and parked at a barrier
  under_load    end of phase 1, after gc.collect()
  after_shrink  end of phase 2 (threads joined), after gc.collect()
  after_idle    after 12 s of time.sleep
  after_trim    after malloc_trim(0) through ctypes
The output is an allocsim measured-run file (the format of spike.py):
`#@ key=value` provenance, with workload= the exact `allocsim run` arguments,
then `T 0 mark LABEL` / `T 0 rss BYTES` lines.

--slice: the GIL passes to a waiting thread after sys.getswitchinterval()
(5 ms).  The script measures its mean request time over phase 1 and records
slice = round(switch interval / request time) requests per turn in the
workload arguments, so the simulation interleaves threads at the measured
granularity.

Usage: webworker.py --out FILE [--threads T --requests N --cache-mb C
                                 --shrink-mb S --seed K --idle-s 12]
MALLOC_* environment variables are read by glibc, MIMALLOC_* by a
free-threaded interpreter's mimalloc; this script records them.
Run it under `nice`: the machine is shared.
"""

import argparse
import collections
import ctypes
import gc
import itertools
import json
import math
import os
import platform
import sys
import sysconfig
import threading
import time

try:  # marks for `allocsim capture` (traces/capture/allocsim.py)
    from allocsim import mark as capture_mark
except ImportError:
    def capture_mark(label):
        pass

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
INV53 = 1.0 / 9007199254740992.0  # 2^-53
TWO_PI = 6.283185307179586        # 2 * math.pi, the literal wl_webworker.c uses
MEDIAN, SIGMA = 4096.0, 1.0       # WEBWORKER_BODY_MEDIAN, _SIGMA
BODY_MIN, BODY_MAX = 2, 1 << 20   # WEBWORKER_BODY_MIN, _MAX
CACHE_PROB = 0.3                  # WEBWORKER_CACHE_PROB
KEYS = ["field%03d" % j for j in range(200)]


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def splitmix64_at(seed, k):
    """The (k+1)-th splitmix64 output from state seed (wl_survivors.h)."""
    return mix64((seed + (k + 1) * GAMMA) & MASK)


def body_len(seed, i):
    """webworker_body_len: Box-Muller, lognormal, clamped; same IEEE ops."""
    z0 = splitmix64_at(seed, 3 * i)
    z1 = splitmix64_at(seed, 3 * i + 1)
    u1 = ((z0 >> 11) + 1) * INV53
    u2 = (z1 >> 11) * INV53
    g = math.sqrt(-2.0 * math.log(u1)) * math.cos(TWO_PI * u2)
    x = MEDIAN * math.exp(SIGMA * g) + 0.5
    if x >= BODY_MAX:
        return BODY_MAX
    if x < BODY_MIN:
        return BODY_MIN
    return int(x)


def is_cached(seed, i):
    return (splitmix64_at(seed, 3 * i + 2) >> 11) * INV53 < CACHE_PROB


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


class Server:
    """The shared cache and the request handler."""

    def __init__(self, seed, cap_bytes):
        self.seed = seed
        self.cap = cap_bytes
        self.cache = collections.OrderedDict()
        self.cache_bytes = 0
        self.lock = threading.Lock()

    def evict(self):
        # popitem frees the node; the tuple's dealloc frees the key; the
        # body goes when len() returns.
        while self.cache_bytes > self.cap:
            self.cache_bytes -= len(self.cache.popitem(last=False)[1])

    def handle(self, i):
        seed = self.seed
        body = b"x" * body_len(seed, i)
        d = {k: j for j, k in enumerate(KEYS)}
        s = json.dumps(d)
        d2 = json.loads(s)
        if is_cached(seed, i):
            with self.lock:
                self.cache[i] = body
                self.cache_bytes += len(body)
                self.evict()
        del d, s, d2, body

    def serve(self, counter, end):
        while True:
            i = next(counter)
            if i >= end:
                return
            self.handle(i)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--requests", type=int, default=96000)
    ap.add_argument("--cache-mb", type=int, default=100)
    ap.add_argument("--shrink-mb", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle-s", type=float, default=12.0)
    a = ap.parse_args()

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    n1, n2 = a.requests, a.requests // 2
    srv = Server(a.seed, a.cache_mb << 20)
    T = a.threads
    start_b = threading.Barrier(T + 1)
    done1_b = threading.Barrier(T + 1)
    go2_b = threading.Barrier(T + 1)
    counters = [itertools.count(0), itertools.count(n1)]

    def worker():
        start_b.wait()
        srv.serve(counters[0], n1)
        done1_b.wait()
        go2_b.wait()
        srv.serve(counters[1], n1 + n2)

    samples = []
    t0 = time.monotonic_ns()

    def mark(label):
        samples.append((time.monotonic_ns() - t0, label, rss_bytes()))
        capture_mark(label)  # the same point in a capture's trace

    threads = [threading.Thread(target=worker) for _ in range(T)]
    for t in threads:
        t.start()
    gc.collect()
    mark("start")
    p1 = time.monotonic_ns()
    start_b.wait()
    done1_b.wait()
    p1_ns = time.monotonic_ns() - p1
    gc.collect()
    mark("under_load")
    with srv.lock:
        srv.cap = a.shrink_mb << 20
        srv.evict()
    p2 = time.monotonic_ns()
    go2_b.wait()
    for t in threads:
        t.join()
    p2_ns = time.monotonic_ns() - p2
    gc.collect()
    mark("after_shrink")
    time.sleep(a.idle_s)
    mark("after_idle")
    tt = time.monotonic_ns()
    libc.malloc_trim(0)
    trim_ns = time.monotonic_ns() - tt
    mark("after_trim")

    req_ns = p1_ns / n1
    switch_ns = sys.getswitchinterval() * 1e9
    slice_ = max(1, round(switch_ns / req_ns))
    env = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items())
                   if k.startswith(("MALLOC_", "MIMALLOC_", "TCMALLOC_"))
                   or k == "GLIBC_TUNABLES")
    # A free-threaded interpreter (Py_GIL_DISABLED) serves mem and obj from
    # its own mimalloc heaps: the cpython model's build=ft, which reads the
    # MIMALLOC_* settings recorded in malloc_env.
    ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    workload = ("webworker --threads %d --requests %d --cache-mb %d "
                "--shrink-mb %d --seed %d --slice %d --python %d.%d"
                % (T, n1, a.cache_mb, a.shrink_mb, a.seed, slice_,
                   sys.version_info[0], sys.version_info[1]))
    meta = [
        ("kind", "measured"),
        ("workload", workload),
        ("model", "cpython:version=%d.%d%s" % (sys.version_info[:2]
                                               + (",build=ft" if ft else "",))),
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
        ("switch_interval_ms", "%g" % (sys.getswitchinterval() * 1e3)),
        ("request_us", "%.1f" % (req_ns / 1e3)),
        ("phase1_ms", "%.1f" % (p1_ns / 1e6)),
        ("phase2_ms", "%.1f" % (p2_ns / 1e6)),
        ("idle_s", "%g" % a.idle_s),
        ("trim_ms", "%.1f" % (trim_ns / 1e6)),
        ("cache_entries_at_end", str(len(srv.cache))),
        ("cache_bytes_at_end", str(srv.cache_bytes)),
    ]
    with open(a.out, "w") as f:
        f.write("allocsim-trace 1\n")
        for k, v in meta:
            f.write("#@ %s=%s\n" % (k, v))
        for t_ns, label, rss in samples:
            f.write("%d 0 mark %s\n%d 0 rss %d\n" % (t_ns, label, t_ns, rss))
    for t_ns, label, rss in samples:
        print("%-13s %8.1f MiB" % (label, rss / 2**20))
    print("request %.1f us, slice %d, phase 1 %.1f s"
          % (req_ns / 1e3, slice_, p1_ns / 1e9))


if __name__ == "__main__":
    main()
