#!/usr/bin/env python3
"""scripts/measure/oracle/run.py -- the measurements behind the oracle's
validation (docs/validation.md), rerunnable on any Debian 12 machine.

  run.py [--build DIR] [--only STEP,...] [--allocators A,...]

Steps (all by default), each writing under data/:
  imports    heaptrack --raw on five real programs nobody here wrote
             (CPython json/regex with PYTHONMALLOC=malloc, sqlite3 importing
             a CSV, gzip, xz with two threads, git log) and on the churn
             program of tests/integration/capture_progs, imported with
             `allocsim import heaptrack` into data/imported/NAME.astrace:
             measured runs whose RSS is heaptrack's; and glibc mtrace logs
             of three of them (a constructor shim starts mtrace(), since the
             programs never call it), imported with --lenient into
             data/imported/NAME.mtrace.astrace (no RSS: oracle inputs)
  workloads  `allocsim oracle --workload` of the synthetic workloads and
             labs on every installed allocator (glibc, jemalloc, mimalloc,
             tcmalloc, musl): data/oracle/ALLOCATOR--CASE.astrace.zst, the
             workload's calls as the replayer ran them (on its clock, with
             its threads' DTVs) and RSS at every mark, compressed with
             zstd -19 (gzip -9 without zstd): a tenth of the bytes
  releases   the workloads and the random and phased traces on other
             releases of an allocator than Debian's, each built from its
             upstream tag (docs/models/tcmalloc.md and mimalloc.md say how)
             and named by a variable: ALLOCSIM_TCMALLOC_215_LIB,
             ALLOCSIM_TCMALLOC_216_LIB; for mimalloc only the traces, with
             ALLOCSIM_MIMALLOC_LIB_2_1_2, _2_1_7, _3_0_1 and _3_4_3
             (`allocsim oracle --lib`); data/oracle/releases/ALLOCATOR-
             RELEASE--CASE.astrace.zst, which the run's tcmalloc_version
             makes compare replay with that release's model.  A release
             whose variable is unset is skipped with a line saying so
  settings   the phased traces under settings that change what an
             allocator keeps: MIMALLOC_LARGE_OS_PAGES=1 on Debian's 2.0.9
             and on 2.1.2 and 2.1.7 built from their tags (named by
             ALLOCSIM_MIMALLOC_LIB_2_1_2 and _2_1_7, as the differential
             test names them), and THP "always" on every allocator (this
             step writes /sys/kernel/mm/transparent_hugepage/enabled and
             puts it back, so it needs root; skipped with a line otherwise):
             data/oracle/settings/ALLOCATOR[-RELEASE]--CASE--SETTING
             .astrace.zst, whose provenance (env, mimalloc_version, thp)
             gives compare the model
  traces     `allocsim oracle` of the imported traces, of random valid
             traces (random_trace.py, seeds 1-4) and of phased ones
             (phased_trace.py, seeds 1-3) on every allocator that has a
             registered model: data/oracle/ALLOCATOR--CASE.astrace (the
             trace again with the measurements)

Then scripts/record_reference.sh records data/imported/ and data/oracle/
with the rest, and scripts/docs/validation_tables.py builds the tables
from the store.  Everything runs with nice; allocators that are not
installed are skipped with a line saying so.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ALLOCATORS = ["glibc", "jemalloc", "mimalloc", "tcmalloc", "musl"]

# name -> allocsim oracle --workload LINE
WORKLOADS = [
    ("lab-brk", "lab-brk"),
    ("lab-mmap-threshold", "lab-mmap-threshold"),
    ("lab-arenas", "lab-arenas"),
    ("lab-arenas-control", "lab-arenas --iterations 0"),
    ("spike", "spike"),
    ("spike-threads16", "spike --threads 16"),
    ("webworker", "webworker --requests 20000"),
    ("webworker-threads16", "webworker --threads 16 --requests 20000"),
    ("survivors-64", "survivors --total 64"),
    ("survivors-512", "survivors --total 64 --size 512"),
]

# Random traces: (name, seed, events, threads).
RANDOM = [("random-1", 1, 20000, 1), ("random-2", 2, 20000, 1),
          ("random-3", 3, 20000, 3), ("random-4", 4, 20000, 4)]
# Phased traces (threads that come and go, build-ups, mass frees, idles,
# trims): (name, seed).
PHASED = [("phased-1", 1), ("phased-2", 2), ("phased-3", 3)]

# Other releases: (allocator, release, variable naming its library, whether
# the workloads run too or only the random and phased traces).  mimalloc's
# variables are the ones its differential test reads.
RELEASES = [("tcmalloc", "2.15", "ALLOCSIM_TCMALLOC_215_LIB", True),
            ("tcmalloc", "2.16", "ALLOCSIM_TCMALLOC_216_LIB", True),
            ("mimalloc", "2.1.2", "ALLOCSIM_MIMALLOC_LIB_2_1_2", False),
            ("mimalloc", "2.1.7", "ALLOCSIM_MIMALLOC_LIB_2_1_7", False),
            ("mimalloc", "3.0.1", "ALLOCSIM_MIMALLOC_LIB_3_0_1", False),
            ("mimalloc", "3.4.3", "ALLOCSIM_MIMALLOC_LIB_3_4_3", False)]

# Settings: (name, allocator, release or "", variable naming its library
# or "", environment, THP mode or "").
SETTINGS = [
    ("large-os-pages", "mimalloc", "", "", ["MIMALLOC_LARGE_OS_PAGES=1"], ""),
    ("large-os-pages", "mimalloc", "2.1.2", "ALLOCSIM_MIMALLOC_LIB_2_1_2",
     ["MIMALLOC_ALLOW_LARGE_OS_PAGES=1"], ""),
    ("large-os-pages", "mimalloc", "2.1.7", "ALLOCSIM_MIMALLOC_LIB_2_1_7",
     ["MIMALLOC_ALLOW_LARGE_OS_PAGES=1"], ""),
] + [("thp-always", a, "", "", [], "always") for a in ALLOCATORS]
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"

# A commit of this repository for git log: fixed, so the run repeats.
GIT_COMMIT = "da46d07"


def log(msg):
    print("run.py: " + msg, file=sys.stderr, flush=True)


def run(cmd, env=None, stdout=subprocess.DEVNULL, cwd=None):
    full = ["nice"] + cmd
    r = subprocess.run(full, env=env, stdout=stdout, stderr=subprocess.PIPE,
                       text=True, cwd=cwd)
    if r.returncode != 0:
        sys.exit("run.py: %s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                              r.stderr.strip()[-800:]))
    return r


class Ctx:
    def __init__(self, build):
        self.allocsim = os.path.join(build, "cli", "allocsim")
        if not os.access(self.allocsim, os.X_OK):
            sys.exit("run.py: %s is not built" % self.allocsim)
        self.build = build
        self.tmp = tempfile.mkdtemp(prefix="allocsim-oracle-run.")
        self.imported = os.path.join(ROOT, "data", "imported")
        self.oracle = os.path.join(ROOT, "data", "oracle")
        os.makedirs(self.imported, exist_ok=True)
        os.makedirs(self.oracle, exist_ok=True)
        self.mtraces = os.path.join(self.tmp, "mtrace")
        os.makedirs(self.mtraces)
        self.csv = os.path.join(self.tmp, "data.csv")
        run([sys.executable, os.path.join(HERE, "make_csv.py"), self.csv,
             "8000"])

    def programs(self):
        """(name, argv, extra environment) of the real programs."""
        py = os.path.join(HERE, "py_json_regex.py")
        return [
            ("python-json-regex", ["/usr/bin/python3", py, "1500"],
             {"PYTHONMALLOC": "malloc"}),
            ("sqlite3-import-csv",
             ["/usr/bin/sqlite3", ":memory:", "-cmd", ".mode csv", "-cmd",
              ".import %s t" % self.csv,
              "SELECT count(*), sum(length(note)) FROM t;"], {}),
            ("gzip", ["/usr/bin/gzip", "-9", "-c", self.csv], {}),
            ("xz-threads2", ["/usr/bin/xz", "-T2", "-6", "-c", self.csv], {}),
            ("git-log", ["/usr/bin/git", "-C", ROOT, "--no-pager", "log",
                         "--stat", "-n", "100", GIT_COMMIT], {}),
            # Written here, the control: malloc and free only, no memory
            # outside malloc but its stack and code.
            ("churn", [os.path.join(self.build, "tests", "integration",
                                    "capture_progs", "churn"), "50000"], {}),
        ]


def step_imports(ctx, heaptrack):
    """heaptrack imports into data/imported (when heaptrack is true), and
    mtrace imports into the scratch directory (always: the traces step
    replays them)."""
    if heaptrack and shutil.which("heaptrack") is None:
        log("heaptrack not installed: heaptrack imports skipped")
        heaptrack = False
    for name, argv, extra in ctx.programs() if heaptrack else []:
        env = dict(os.environ, **extra)
        out = os.path.join(ctx.tmp, name)
        run(["heaptrack", "--raw", "-o", out] + argv, env=env)
        trace = os.path.join(ctx.imported, name + ".astrace")
        run([ctx.allocsim, "import", "heaptrack", out + ".raw.zst", "-o",
             trace])
        log("imported %s" % trace)
    shim = os.path.join(ctx.tmp, "mtrace_start.so")
    run(["cc", "-shared", "-fPIC", "-O1", "-o", shim,
         os.path.join(HERE, "mtrace_start.c")])
    for name, argv, extra in ctx.programs():
        if name not in ("python-json-regex", "sqlite3-import-csv", "git-log",
                        "churn"):
            continue
        log_path = os.path.join(ctx.tmp, name + ".mtrace")
        env = dict(os.environ, MALLOC_TRACE=log_path,
                   LD_PRELOAD="libc_malloc_debug.so.0 " + shim, **extra)
        run(argv, env=env)
        trace = os.path.join(ctx.mtraces, name + ".mtrace.astrace")
        run([ctx.allocsim, "import", "mtrace", log_path, "--lenient", "-o",
             trace])
        log("imported %s" % trace)


def installed(ctx, allocator):
    """Whether allocsim oracle can run this allocator here (a probe)."""
    r = subprocess.run([ctx.allocsim, "oracle", "--workload", "lab-brk",
                        "--allocator", allocator, "--sample-every", "0"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log("%s: skipped: %s" % (allocator, r.stderr.strip()))
    return r.returncode == 0


def modelled(ctx, allocator):
    return subprocess.run([ctx.allocsim, "models", allocator],
                          capture_output=True).returncode == 0


def compress(path):
    """path compressed next to it (zstd, else gzip), replacing it; the
    compressed file's path.  allocsim reads either as the trace itself."""
    tool, ext = (["zstd", "-q", "-19", "--rm", "-f"], ".zst") \
        if shutil.which("zstd") else (["gzip", "-9", "-f"], ".gz")
    run(tool + [path])
    return path + ext


def step_workloads(ctx, allocators):
    for a in allocators:
        for name, line in WORKLOADS:
            base = os.path.join(ctx.oracle, "%s--%s" % (a, name))
            for old in glob.glob(base + ".*"):
                os.remove(old)
            out = base + ".astrace"
            run([ctx.allocsim, "oracle", "--workload", line, "--allocator", a,
                 "--idle-scale", "0", "--sample-every", "0", "-o", out])
            log("measured %s" % compress(out))


def trace_inputs(ctx):
    """(name, path) of the traces the oracle replays: the imports and the
    random traces (written to the scratch directory)."""
    out = []
    for d in (ctx.imported, ctx.mtraces):
        for f in sorted(os.listdir(d)):
            if f.endswith(".astrace"):
                out.append((f[:-len(".astrace")], os.path.join(d, f)))
    for name, seed, events, threads in RANDOM:
        path = os.path.join(ctx.tmp, name + ".trace")
        run([sys.executable, os.path.join(HERE, "random_trace.py"), path,
             str(seed), str(events), str(threads)])
        out.append((name, path))
    for name, seed in PHASED:
        path = os.path.join(ctx.tmp, name + ".trace")
        run([sys.executable, os.path.join(HERE, "phased_trace.py"), path,
             str(seed)])
        out.append((name, path))
    return out


def step_traces(ctx, allocators):
    for a in allocators:
        if not modelled(ctx, a):
            log("%s: no registered model yet: traces skipped" % a)
            continue
        for name, path in trace_inputs(ctx):
            out = os.path.join(ctx.oracle, "%s--%s.astrace" % (a, name))
            run([ctx.allocsim, "oracle", path, "--allocator", a,
                 "--idle-scale", "0", "--lenient", "-o", out])
            log("measured %s" % out)


def step_releases(ctx):
    outdir = os.path.join(ctx.oracle, "releases")
    os.makedirs(outdir, exist_ok=True)
    inputs = [(name, path) for name, path in trace_inputs(ctx)
              if name.startswith(("random-", "phased-"))]
    for a, release, var, workloads in RELEASES:
        lib = os.environ.get(var, "")
        if not lib:
            log("%s %s: skipped: set %s to its library" % (a, release, var))
            continue
        for name, line in WORKLOADS if workloads else []:
            base = os.path.join(outdir, "%s-%s--%s" % (a, release, name))
            for old in glob.glob(base + ".*"):
                os.remove(old)
            run([ctx.allocsim, "oracle", "--workload", line, "--allocator", a,
                 "--lib", lib, "--idle-scale", "0", "--sample-every", "0",
                 "-o", base + ".astrace"])
            log("measured %s" % compress(base + ".astrace"))
        for name, path in inputs:
            out = os.path.join(outdir, "%s-%s--%s.astrace" % (a, release, name))
            for old in glob.glob(out + "*"):
                os.remove(old)
            # A release may crash on a trace (3.0.1 on random-1 and -2: it
            # drops a page's has-aligned flag when it abandons the page,
            # fixed upstream in v3.0.2-beta, docs/models/mimalloc.md);
            # that is the library's, so the line says so and the others
            # go on.
            r = subprocess.run(["nice", ctx.allocsim, "oracle", path,
                                "--allocator", a, "--lib", lib, "--idle-scale",
                                "0", "--lenient", "-o", out],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                log("%s %s on %s: failed: %s" % (a, release, name,
                                                 r.stderr.strip()[-300:]))
                for old in glob.glob(out + "*"):
                    os.remove(old)
                continue
            log("measured %s" % compress(out))


def thp_mode():
    """The THP mode in brackets in THP_ENABLED, or "" if unreadable."""
    try:
        with open(THP_ENABLED) as f:
            words = f.read().split()
    except OSError:
        return ""
    return next((w[1:-1] for w in words if w.startswith("[")), "")


def set_thp(mode):
    """Writes mode to THP_ENABLED; whether it took."""
    try:
        with open(THP_ENABLED, "w") as f:
            f.write(mode)
    except OSError:
        return False
    return thp_mode() == mode


def step_settings(ctx, allocators):
    outdir = os.path.join(ctx.oracle, "settings")
    os.makedirs(outdir, exist_ok=True)
    inputs = [(name, path) for name, path in trace_inputs(ctx)
              if name.startswith("phased-")]
    was = thp_mode()
    try:
        for setting, a, release, var, env, thp in SETTINGS:
            lib = os.environ.get(var, "") if var else ""
            who = a + ("-" + release if release else "")
            if a not in allocators or (var and not lib):
                log("%s %s: skipped%s" % (who, setting, (": set %s to its "
                    "library" % var) if var and not lib else ""))
                continue
            if thp and not set_thp(thp):
                log("%s %s: skipped: cannot write %s (root?)"
                    % (who, setting, THP_ENABLED))
                continue
            for name, path in inputs:
                out = os.path.join(outdir, "%s--%s--%s.astrace"
                                   % (who, name, setting))
                cmd = [ctx.allocsim, "oracle", path, "--allocator", a,
                       "--idle-scale", "0", "--lenient", "-o", out]
                cmd += ["--lib", lib] if lib else []
                for e in env:
                    cmd += ["--env", e]
                run(cmd)
                log("measured %s" % compress(out))
            if thp:
                set_thp(was)
    finally:
        if was and thp_mode() != was:
            set_thp(was)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only",
                    default="imports,workloads,traces,releases,settings")
    ap.add_argument("--allocators", default=",".join(ALLOCATORS),
                    help="the allocators to measure (default all: %s)"
                    % ",".join(ALLOCATORS))
    args = ap.parse_args()
    ctx = Ctx(os.path.abspath(args.build))
    steps = args.only.split(",")
    try:
        step_imports(ctx, "imports" in steps)
        chosen = args.allocators.split(",")
        unknown = [a for a in chosen if a not in ALLOCATORS]
        if unknown:
            sys.exit("run.py: --allocators: unknown %s (known: %s)"
                     % (",".join(unknown), ",".join(ALLOCATORS)))
        allocators = [a for a in chosen
                      if ("workloads" in steps or "traces" in steps or
                          "settings" in steps) and installed(ctx, a)]
        if "workloads" in steps:
            step_workloads(ctx, allocators)
        if "traces" in steps:
            step_traces(ctx, allocators)
        if "releases" in steps:
            step_releases(ctx)
        if "settings" in steps:
            step_settings(ctx, allocators)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
