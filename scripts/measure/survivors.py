#!/usr/bin/env python3
"""scripts/measure/survivors.py -- the survivors experiment, run for real.

Runs in CPython exactly the program that `allocsim run survivors` models
(traces/wl_survivors.c): build --total MiB of distinct bytes objects whose
sys.getsizeof is --size, keep the survivors chosen by the same splitmix64
rule, delete the rest and the list, optionally allocate again, and read RSS
from /proc/self/smaps_rollup (exact; statm/VmRSS lag by up to 64 pages per
thread on Linux 6.1, mm/memory.c:198 TASK_RSS_EVENTS_THRESH) at every mark.

Writes a measured-run file: an allocsim text trace with provenance (#@
lines, kind=measured, workload=<the `allocsim run` workload arguments>),
and for each mark `T 0 mark LABEL` followed by `T 0 rss BYTES`.

The survivor rule must stay identical to survivors_is_kept() in C:
  random  object i survives iff (splitmix64_at(seed, i) >> 11) * 2**-53 < p,
          splitmix64_at(seed, i) being the (i+1)-th output of Vigna's
          splitmix64 seeded with seed;
  stride  i % every == 0;
  oldest  i < floor(p * n).
Flags are computed before the `start` mark into one bytearray, so the
selection itself allocates nothing the model does not know about.

Heap state at start.  The model starts from an empty pymalloc; a real
interpreter starts with a few arenas holding free pools, which the first
objects would fill, shifting every arena boundary against the model's and
so re-drawing which arenas survivors pin (the binomial sd is several MiB).
With --fill (the default) the script first allocates, before `start`,
filler objects of the same size class until no arena has a free pool and
the class has no free block (read from sys._debugmallocstats), so the
built objects start in a fresh arena as in the model.  The fillers live to
the end, like the interpreter's own objects.  --no-fill measures the raw
state instead.  pymalloc's own counts (arenas, unaligned arenas, unused
pools) at each mark are recorded as provenance (pymalloc_<label>_*).

Each object is os.urandom(size - 33): one PyObject_Malloc of
PyBytesObject_SIZE (33) + n bytes through PyBytes_FromStringAndSize, with
distinct contents written by the kernel.  The build loop iterates
itertools.repeat(None, n), so no int objects are created per element.
"""
import argparse
import gc
import itertools
import os
import platform
import sys
import time

PYBYTES_OBJECT_SIZE = 33  # CPython Objects/bytesobject.c:33 on 64-bit
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
MUL1 = 0xBF58476D1CE4E5B9
MUL2 = 0x94D049BB133111EB
MIB = 1048576


def splitmix64_at(seed, i):
    z = (seed + (i + 1) * GAMMA) & M64
    z = ((z ^ (z >> 30)) * MUL1) & M64
    z = ((z ^ (z >> 27)) * MUL2) & M64
    return z ^ (z >> 31)


def survivor_flags(n, pattern, fraction, every, seed):
    flags = bytearray(n)
    if pattern == "random":
        # (z >> 11) * 2**-53 < p  <=>  (z >> 11) < p * 2**53, exactly.
        limit = fraction * 9007199254740992.0
        state = seed
        for i in range(n):
            state = (state + GAMMA) & M64
            z = state
            z = ((z ^ (z >> 30)) * MUL1) & M64
            z = ((z ^ (z >> 27)) * MUL2) & M64
            z ^= z >> 31
            if (z >> 11) < limit:
                flags[i] = 1
    elif pattern == "stride":
        flags[::every] = b"\x01" * len(range(0, n, every))
    elif pattern == "oldest":
        c = int(fraction * n)
        flags[:c] = b"\x01" * c
    else:
        raise SystemExit(f"survivors.py: --pattern expects random, stride "
                         f"or oldest, got '{pattern}'")
    return flags


def read_rss():
    fd = os.open("/proc/self/smaps_rollup", os.O_RDONLY)
    try:
        data = os.read(fd, 8192)
    finally:
        os.close(fd)
    for line in data.split(b"\n"):
        if line.startswith(b"Rss:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("survivors.py: no Rss line in /proc/self/smaps_rollup")


def mallocstats():
    """sys._debugmallocstats() parsed: arenas, unaligned, unused pools and
    per-class blocks in use and avail blocks.  Its output goes to stderr (C stdio); catch it
    in a memfd so nothing is printed."""
    mfd = os.memfd_create("mallocstats")
    saved = os.dup(2)
    try:
        os.dup2(mfd, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    os.lseek(mfd, 0, os.SEEK_SET)
    chunks = []
    while True:
        b = os.read(mfd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(mfd)
    st = {"avail": {}, "inuse": {}, "arenas": 0, "unused_pools": 0,
          "unaligned": 0}
    for line in b"".join(chunks).decode().splitlines():
        f = line.split()
        if len(f) == 5 and f[0].isdigit() and f[1].isdigit():
            st["avail"][int(f[1])] = int(f[4].replace(",", ""))
            st["inuse"][int(f[1])] = int(f[3].replace(",", ""))
        elif line.startswith("# arenas allocated current"):
            st["arenas"] = int(f[-1].replace(",", ""))
        elif "unused pools * 16384" in line:
            st["unused_pools"] = int(f[0])
        elif line.startswith("# bytes lost to arena alignment"):
            st["unaligned"] = int(f[-1].replace(",", "")) // 16384
    return st


def fill(size):
    """Fillers of size's class until no arena has a free pool and the class
    has no free block.  Each round's list is allocated at its final length
    (at least 65 slots, so ob_item is a libc block, never a pymalloc block
    of this class); the loop index ints churn one class-32 block.  A round
    can overshoot into a new arena when a list or int needs a fresh pool;
    the next round fills that arena too."""
    block = (size + 15) // 16 * 16
    per_pool = (16384 - 48) // block  # NUMBLOCKS, obmalloc.c:1064
    k = size - PYBYTES_OBJECT_SIZE
    urandom = os.urandom
    fillers = []
    for rnd in range(8):
        st = mallocstats()
        need = st["avail"].get(block, 0) + st["unused_pools"] * per_pool
        # Done when nothing is free, or (after a round) all that is free is
        # one arena the stats' own temporaries just opened: its pools go
        # back to its freepools when they die, and the build starts there.
        if need == 0 or (rnd > 0 and st["unused_pools"] <= 64
                         and st["avail"].get(block, 0) <= per_pool):
            break
        # The list object itself (56 bytes, class 64) may take a block, so
        # count again once it exists; its ob_item (>= 65 slots) is libc's.
        fl = [None] * max(need + per_pool, 65)
        st = mallocstats()
        need = st["avail"].get(block, 0) + st["unused_pools"] * per_pool
        if os.environ.get("SURVIVORS_DEBUG"):
            print("fill:", st["arenas"], st["unused_pools"],
                  st["avail"].get(block, 0), file=sys.stderr)
        for i in range(min(need, len(fl))):
            fl[i] = urandom(k)
        fillers.append(fl)
    else:
        raise SystemExit("survivors.py: could not fill the free pools")
    return fillers


def build(n, size):
    objs = []
    app = objs.append
    urandom = os.urandom
    k = size - PYBYTES_OBJECT_SIZE
    for _ in itertools.repeat(None, n):
        app(urandom(k))
    return objs


def arena_layout(objs, flags):
    """Where the objects really went: split the build, in allocation order,
    into runs whose blocks sit in the same or the next 16 KiB pool (id() is
    the address); a new arena (or another arena's free pool) starts a new
    run.  Returns (runs, runs holding a survivor, Counter of run lengths).
    A run of 16065 objects is an unaligned 64 B arena (63 pools), 16320 an
    aligned one (64 pools); the pinned count given this layout should equal
    the new arenas measured at `after`, whatever the model's layout."""
    from collections import Counter
    sizes, pinned = Counter(), 0
    prev, start, hit = None, 0, False
    for i, o in enumerate(objs):
        pool = id(o) >> 14
        if prev is not None and pool != prev and pool != prev + 1:
            sizes[i - start] += 1
            pinned += hit
            start, hit = i, False
        hit = hit or flags[i]
        prev = pool
    sizes[len(objs) - start] += 1
    pinned += hit
    return sum(sizes.values()), pinned, sizes


def select(objs, flags):
    keep = []
    app = keep.append
    for o, f in zip(objs, flags):
        if f:
            app(o)
    return keep


def workload_words(a):
    """The workload exactly as `allocsim run survivors` takes it: the options
    that matter for this pattern, spelled as given (survivors_ft.py adds its
    own)."""
    wl = ["--size", a.size, "--total", a.total, "--pattern", a.pattern]
    if a.pattern == "stride":
        wl += ["--every", a.every]
    else:
        wl += ["--fraction", a.fraction]
    if a.pattern == "random":
        wl += ["--seed", a.seed]
    if int(a.reuse_size):
        wl += ["--reuse-size", a.reuse_size, "--reuse-total", a.reuse_total]
    return wl


def machine_meta():
    """Provenance of this machine and interpreter: [(key, value)]."""
    with open("/proc/sys/kernel/hostname") as f:
        host = f.read().strip()
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read().strip()
    except OSError:
        thp = "unknown"
    return [
        ("machine", f"{host} {platform.machine()}, {os.cpu_count()} cpus"),
        ("kernel", platform.release()),
        ("page_size", str(os.sysconf("SC_PAGE_SIZE"))),
        ("python", platform.python_version()),
        ("python_build", " ".join(platform.python_build())),
        ("libc", libc_version()),
        ("thp", thp),
        ("rss_source", "/proc/self/smaps_rollup Rss"),
    ]


def write_run(path, meta, samples):
    """A measured-run file: the provenance, then per sample (t_ns, label or
    None for a periodic sample, rss) a mark line if labelled and an rss
    line."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("allocsim-trace 1\n")
        for k, v in meta:
            f.write(f"#@ {k}={v[:250]}\n")
        for t, label, rss in samples:
            if label is not None:
                f.write(f"{t} 0 mark {label}\n")
            f.write(f"{t} 0 rss {rss}\n")
    os.replace(tmp, path)


def libc_version():
    name, ver = platform.libc_ver()
    return f"{name} {ver}".strip() or "unknown"


def run_meta(workload):
    """The provenance every measured Python run carries: what ran, where,
    with which interpreter, libc and allocator environment."""
    return [
        ("kind", "measured"),
        ("workload", workload),
        ("model", f"cpython:version={sys.version_info[0]}."
                  f"{sys.version_info[1]}"),
        ("command", " ".join([os.path.basename(sys.executable)] + sys.argv)),
    ] + machine_meta() + [
        ("PYTHONMALLOC", os.environ.get("PYTHONMALLOC", "(unset)")),
        ("malloc_env", " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                                if k.startswith(("MALLOC_", "GLIBC_TUNABLES")))
         or "(none)"),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="64")
    ap.add_argument("--total", default="256", help="MiB")
    ap.add_argument("--pattern", default="random")
    ap.add_argument("--fraction", default="1e-4")
    ap.add_argument("--every", default="1000")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--reuse-size", default="0")
    ap.add_argument("--reuse-total", default="256", help="MiB")
    ap.add_argument("--settle-ms", default="0")
    ap.add_argument("--out", required=True, help="measured-run file to write")
    ap.add_argument("--no-fill", dest="fill", action="store_false",
                    help="do not fill existing arenas' free pools first")
    a = ap.parse_args()

    size, seed, every = int(a.size), int(a.seed), int(a.every)
    total_mib, fraction = float(a.total), float(a.fraction)
    reuse_size, reuse_mib = int(a.reuse_size), float(a.reuse_total)
    settle_ms = int(a.settle_ms)
    if size < 35 or (reuse_size and reuse_size < 35):
        raise SystemExit("survivors.py: --size and --reuse-size expect at "
                         "least 35 (a 2-byte bytes object)")
    n = int(total_mib * MIB) // size
    m = int(reuse_mib * MIB) // reuse_size if reuse_size else 0

    wl = ["survivors"] + workload_words(a)
    if settle_ms:
        wl += ["--settle-ms", a.settle_ms]

    flags = survivor_flags(n, a.pattern, fraction, every, seed)
    kept_count = flags.count(1)
    samples = []
    pstats = []
    gc.collect()
    fillers = fill(size) if a.fill and size <= 512 else []
    t0 = time.monotonic_ns()

    def mark(label):
        t = time.monotonic_ns() - t0
        samples.append((t, label, read_rss()))
        # After the RSS reading, so the walk cannot affect it.
        st = mallocstats()
        if os.environ.get("SURVIVORS_MAPS"):  # debugging: the layout
            with open(f"{os.environ['SURVIVORS_MAPS']}.{label}", "wb") as f:
                with open("/proc/self/maps", "rb") as m:
                    f.write(m.read())
        pstats.append((label, st["arenas"], st["unaligned"],
                       st["unused_pools"]))

    mark("start")
    objs = build(n, size)
    mark("peak")
    # After the peak reading; it only churns int temporaries.
    layout = arena_layout(objs, flags) if size <= 512 else None
    keep = select(objs, flags)
    del objs  # list_dealloc: items backwards, then ob_item
    gc.collect()
    deadline = time.monotonic() + settle_ms / 1000.0
    while time.monotonic() < deadline:
        junk = [None] * 4, {}
        del junk
        time.sleep(0.05)
    mark("after")
    if m:
        objs2 = build(m, reuse_size)
        mark("after_reuse")
        del objs2
    assert len(keep) == kept_count
    nfill = sum(sum(o is not None for o in f) for f in fillers)

    meta = run_meta(" ".join(wl)) + [
        ("baseline_rss_bytes", str(samples[0][2])),
        ("objects", str(n)),
        ("survivors", str(kept_count)),
        ("fillers", f"{nfill} objects of {size} bytes" if a.fill
         else "none (--no-fill)"),
    ]
    if layout is not None:
        runs, lpinned, sizes = layout
        meta.append(("layout_runs", str(runs)))
        meta.append(("layout_pinned_runs", str(lpinned)))
        meta.append(("layout_run_sizes", " ".join(
            f"{k}x{v}" for k, v in sizes.most_common(12))))
    for label, arenas, unaligned, unused in pstats:
        meta.append((f"pymalloc_{label}",
                     f"arenas={arenas} unaligned={unaligned} "
                     f"unused_pools={unused}"))
    write_run(a.out, meta, samples)
    start = samples[0][2]
    for t, label, rss in samples:
        print(f"{label:12s} {rss / MIB:10.2f} MiB  {(rss - start) / MIB:+10.2f}",
              file=sys.stderr)
    for label, arenas, unaligned, unused in pstats:
        print(f"pymalloc at {label}: {arenas} arenas ({unaligned} unaligned), "
              f"{unused} unused pools", file=sys.stderr)


if __name__ == "__main__":
    main()
