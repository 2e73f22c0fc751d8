#!/usr/bin/env python3
"""scripts/measure/survivors_ft.py -- the survivors experiment on a
free-threaded CPython (3.13t / 3.14t), run for real.

The same program as scripts/measure/survivors.py (whose survivor rule and
RSS reader it imports), adapted to the free-threaded build, where every
object lives in a per-thread mimalloc heap and emptied pages are parked
until a QSBR grace period has passed (CPython Objects/obmalloc.c
_PyMem_mi_page_maybe_free):

    objs = [os.urandom(size - sys.getsizeof(b"")) for each object]  # peak
    keep = [o for o, f in zip(objs, flags) if f]
    del objs; gc.collect()                                          # freed
    for --settle-ms: every 50 ms either nothing (--idle) or the light
        allocation survivors.py does ([None] * 4 and {}), RSS every 100 ms
                                                                    # after
    optional: one bytes object of --alloc-after bytes               # after_alloc
    optional reuse: --reuse-total MiB of --reuse-size bytes objects,
        or tuples with --reuse-kind tuple                           # after_reuse

Differences from survivors.py, all because of the build:
  - The bytes header is larger (ob_tid, ob_ref_local, ob_ref_shared): the
    payload is size - sys.getsizeof(b"") so that sys.getsizeof, i.e. the
    PyObject_Malloc request, is still --size.
  - No pymalloc filling or pymalloc stats (there is no pymalloc).
  - An RSS sample every 100 ms during the settle phase (rss lines between
    the marks), since the question is when, if ever, memory comes back.
  - Provenance records build=ft, the MIMALLOC_* environment (malloc_env,
    which `allocsim record` maps to the model's knobs), Py_GIL_DISABLED and
    whether the GIL is actually off at run time.

RSS is read from /proc/self/smaps_rollup (exact).  Writes a measured-run
file: an allocsim text trace with #@ provenance, `T 0 mark LABEL` + `T 0 rss
BYTES` at marks and `T 0 rss BYTES` for the periodic samples.
"""
import argparse
import gc
import itertools
import os
import platform
import sys
import sysconfig
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from survivors import (MIB, machine_meta, read_rss,  # noqa: E402
                       select, survivor_flags, workload_words, write_run)

SETTLE_STEP_S = 0.05   # the light allocation's period, as in survivors.py
SAMPLE_EVERY_NS = 100_000_000


def build(n, size):
    """n distinct bytes objects whose sys.getsizeof is size."""
    objs = []
    app = objs.append
    urandom = os.urandom
    k = size - sys.getsizeof(b"")
    for _ in itertools.repeat(None, n):
        app(urandom(k))
    return objs


def tuple_maker(size):
    """A function returning a new tuple of Nones whose sys.getsizeof (the
    GC-heap request in the free-threaded build, which has no GC header) is
    size: BUILD_TUPLE of k names, so no temporary is allocated."""
    k = (size - sys.getsizeof(())) // 8
    mk = eval("lambda x: (" + "x, " * k + ")")
    if k < 1 or sys.getsizeof(mk(None)) != size:
        raise SystemExit(f"survivors_ft.py: no tuple has sys.getsizeof "
                         f"{size} here (empty tuple: {sys.getsizeof(())}, "
                         f"+8 per item)")
    return mk


def build_tuple_objects(n, size):
    """n distinct tuples of getsizeof size (the GC heap)."""
    mk = tuple_maker(size)
    objs = []
    app = objs.append
    for _ in itertools.repeat(None, n):
        app(mk(None))
    return objs


def page_layout(objs, flags):
    """Where the objects really went: the 64 KiB mimalloc pages (slices) and
    32 MiB segments their addresses (id()) fall in.  Returns (pages, pages
    holding a survivor, segments, Counter of objects per page): the pinned
    count is what the page formula predicts for this very layout."""
    from collections import Counter
    per_page = Counter(id(o) >> 16 for o in objs)
    pinned = {id(o) >> 16 for o, f in zip(objs, flags) if f}
    segments = {p >> 9 for p in per_page}
    return len(per_page), len(pinned), len(segments), Counter(per_page.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="64")
    ap.add_argument("--kind", default="bytes", choices=("bytes", "tuple"),
                    help="bytes: the object heap (the study); tuple: the GC "
                         "heap, whose pages the cyclic GC visits")
    ap.add_argument("--total", default="256", help="MiB")
    ap.add_argument("--pattern", default="random")
    ap.add_argument("--fraction", default="1e-4")
    ap.add_argument("--every", default="1000")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--settle-ms", default="2500",
                    help="time between the free and the `after` mark")
    ap.add_argument("--idle", action="store_true",
                    help="sleep through the settle phase, allocating nothing")
    ap.add_argument("--alloc-after", default="0",
                    help="after `after`, allocate one bytes object of this "
                         "size (> 128 KiB: a large page of the object heap, "
                         "whose allocation runs the QSBR page collect) and "
                         "mark `after_alloc` 200 ms later")
    ap.add_argument("--reuse-size", default="0")
    ap.add_argument("--reuse-total", default="256", help="MiB")
    ap.add_argument("--reuse-kind", default="bytes",
                    choices=("bytes", "tuple"),
                    help="what the reuse phase allocates: bytes, or tuples "
                         "(the GC heap), --reuse-total MiB of --reuse-size")
    ap.add_argument("--layout", action="store_true",
                    help="record the page/segment layout of the objects "
                         "(allocates temporaries before the free)")
    ap.add_argument("--out", required=True, help="measured-run file to write")
    a = ap.parse_args()

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        raise SystemExit("survivors_ft.py: this interpreter is not a "
                         "free-threaded build (Py_GIL_DISABLED is not set); "
                         "use scripts/measure/survivors.py")
    size, seed, every = int(a.size), int(a.seed), int(a.every)
    total_mib, fraction = float(a.total), float(a.fraction)
    settle_ms = int(a.settle_ms)
    reuse_size, reuse_mib = int(a.reuse_size), float(a.reuse_total)
    alloc_after = int(a.alloc_after)
    base = sys.getsizeof(b"")
    if a.kind == "tuple":
        tuple_maker(size)  # checks the sizes before anything is measured
    if reuse_size and a.reuse_kind == "tuple":
        tuple_maker(reuse_size)
    if (a.kind == "bytes" and size < base + 2) or \
            (reuse_size and a.reuse_kind == "bytes" and reuse_size < base + 2):
        raise SystemExit(f"survivors_ft.py: --size and --reuse-size expect "
                         f"at least {base + 2} (a 2-byte bytes object here)")
    if settle_ms < 0:
        raise SystemExit("survivors_ft.py: --settle-ms expects a "
                         "non-negative number of milliseconds")
    n = int(total_mib * MIB) // size
    m = int(reuse_mib * MIB) // reuse_size if reuse_size else 0

    wl = ["survivors", "--build", "ft"] + workload_words(a)
    if a.kind == "tuple":
        wl += ["--kind", "tuple"]
    if reuse_size and a.reuse_kind == "tuple":
        wl += ["--reuse-kind", "tuple"]
    wl += ["--settle-ms", a.settle_ms]
    if int(a.alloc_after):
        wl += ["--alloc-after", a.alloc_after]

    flags = survivor_flags(n, a.pattern, fraction, every, seed)
    kept_count = flags.count(1)
    samples = []  # (t_ns, label or None, rss)
    gc.collect()
    t0 = time.monotonic_ns()

    def sample(label=None):
        samples.append((time.monotonic_ns() - t0, label, read_rss()))

    sample("start")
    t_build = time.monotonic_ns()
    objs = build(n, size) if a.kind == "bytes" else build_tuple_objects(n, size)
    t_build = time.monotonic_ns() - t_build
    sample("peak")
    # After the peak reading; its temporaries (ints, a dict) are freed into
    # the heaps before `freed`, so it is opt-in and recorded.
    layout = page_layout(objs, flags) if a.layout else None
    keep = select(objs, flags)
    t_del = time.monotonic_ns()
    del objs  # list_dealloc: items backwards, then the item array
    t_del = time.monotonic_ns() - t_del
    gc.collect()
    sample("freed")
    t_end = time.monotonic_ns() + settle_ms * 1_000_000
    next_sample = time.monotonic_ns() + SAMPLE_EVERY_NS
    while True:
        now = time.monotonic_ns()
        if now >= t_end:
            break
        if not a.idle:
            junk = [None] * 4, {}
            del junk
        time.sleep(min(SETTLE_STEP_S, (t_end - now) / 1e9))
        if time.monotonic_ns() >= next_sample:
            sample()
            next_sample += SAMPLE_EVERY_NS
    sample("after")
    if alloc_after:
        big = bytes(alloc_after)
        time.sleep(0.2)
        sample("after_alloc")
        del big
    if m:
        objs2 = (build(m, reuse_size) if a.reuse_kind == "bytes"
                 else build_tuple_objects(m, reuse_size))
        sample("after_reuse")
        del objs2
    assert len(keep) == kept_count

    # This run's own pace, so that a replay's purge delays expire where
    # this run's did (which of the list's old arrays get purged).
    if n:
        wl += ["--alloc-ns", str(max(1, round(t_build / n))),
               "--free-ns", str(max(1, round(t_del / max(1, n - kept_count))))]
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    meta = [
        ("kind", "measured"),
        ("workload", " ".join(wl)),
        ("build", "ft"),
        ("command", " ".join([os.path.basename(sys.executable)] + sys.argv)),
    ] + machine_meta() + [
        ("py_gil_disabled", str(sysconfig.get_config_var("Py_GIL_DISABLED"))),
        ("gil_enabled_at_run", str(gil)),
        ("malloc_env", " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                                if k.startswith(("MIMALLOC_", "MALLOC_",
                                                 "GLIBC_TUNABLES")))
         or "(none)"),
        ("settle", "idle" if a.idle else "light allocation every 50 ms"),
        ("baseline_rss_bytes", str(samples[0][2])),
        ("objects", str(n)),
        ("survivors", str(kept_count)),
        ("bytes_header", str(base)),
        ("object_kind", a.kind),
    ]
    if layout is not None:
        pages, pinned, segments, per_page = layout
        meta.append(("layout_pages", str(pages)))
        meta.append(("layout_pinned_pages", str(pinned)))
        meta.append(("layout_segments", str(segments)))
        meta.append(("layout_objects_per_page", " ".join(
            f"{k}x{v}" for k, v in per_page.most_common(6))))
    write_run(a.out, meta, samples)
    start = samples[0][2]
    for t, label, rss in samples:
        if label is not None:
            print(f"{label:12s} {t / 1e9:8.2f} s {rss / MIB:10.2f} MiB  "
                  f"{(rss - start) / MIB:+10.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
