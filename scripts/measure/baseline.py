#!/usr/bin/env python3
"""scripts/measure/baseline.py -- RSS of an idle interpreter that imported
what the load-spike study's guide imports (asyncio, tracemalloc, ctypes, gc,
random).

The load-spike study (docs/studies.md) publishes one start figure (21 MiB,
defaults) but its
MALLOC_MMAP_THRESHOLD_=512 row starts from a different, unpublished
baseline: with the threshold at 512 every startup allocation over 512 bytes
takes its own page.  This script measures that shift on this machine so the
validation can use a measured baseline instead of a tuned one.  It writes a
measured-run file with a single mark, `start`, and its RSS (exact, from
/proc/self/smaps_rollup).  MALLOC_* are read by glibc; this only records them.

Usage: baseline.py --out FILE
"""
import argparse
import asyncio  # noqa: F401  (imported for its footprint, as in the study)
import ctypes  # noqa: F401
import gc
import os
import platform
import random  # noqa: F401
import sys
import tracemalloc  # noqa: F401


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    gc.collect()
    rss = None
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
    env = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items())
                   if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")
    meta = [
        ("kind", "measured"),
        ("command", " ".join([os.path.basename(sys.executable)] + sys.argv)),
        ("machine", "%s %s, %d cpus" % (platform.node(), platform.machine(),
                                        os.cpu_count())),
        ("kernel", platform.release()),
        ("python", platform.python_version()),
        ("glibc", "-".join(platform.libc_ver())),
        ("malloc_env", env if env else "(none)"),
        ("imports", "asyncio ctypes gc random tracemalloc"),
        ("rss_source", "/proc/self/smaps_rollup Rss"),
    ]
    with open(a.out, "w") as f:
        f.write("allocsim-trace 1\n")
        for k, v in meta:
            f.write("#@ %s=%s\n" % (k, v))
        f.write("0 0 mark start\n0 0 rss %d\n" % rss)
    print("start %.1f MiB" % (rss / 2**20))


if __name__ == "__main__":
    main()
