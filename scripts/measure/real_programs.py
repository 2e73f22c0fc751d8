#!/usr/bin/env python3
"""scripts/measure/real_programs.py -- captures ten real programs nobody
here wrote, records them as measured runs and compares each with the model.

    real_programs.py ALLOCSIM --db DB --traces DIR --work DIR [--only a,b]
                     [--allocators glibc,jemalloc,mimalloc,tcmalloc]
                     [--table]

For each program (PROGRAMS below): builds its input in --work (seeded, so
every run sees the same input), times one plain run, then runs it under
`allocsim capture -o DIR/NAME.astrace --db DB` and compares the stored run
with `allocsim compare RUN --db DB --json --no-store` (the default: the
mean over address layouts, the model and libc from the run's provenance).
A fork+exec chain's other processes are recorded too (`allocsim record`)
and compared on their own.

--allocators (default glibc: the system's) captures each program once per
allocator named; the others are preloaded (Debian's libraries, PRELOADS
below; `allocsim capture` puts the recorder first in LD_PRELOAD), their
traces NAME--ALLOCATOR.astrace, their runs marked with the run_meta key
program_preload (the table "capture-programs-preloaded" of
docs/capture.md); compare picks the allocator's model from the run's
LD_PRELOAD.

Prints one JSON object per line (a compared process), and with --table the
Markdown table of docs/capture.md.  Python 3 standard library only; run it
with /usr/bin/python3 (Debian's), as the CPython programs are captured
under it.
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "capture_programs")
PY = "/usr/bin/python3"

# Debian's libraries of the allocators --preload names
LIBDIR = "/usr/lib/x86_64-linux-gnu"
PRELOADS = {
    "jemalloc": os.path.join(LIBDIR, "libjemalloc.so.2"),
    "mimalloc": os.path.join(LIBDIR, "libmimalloc.so.2"),
    "tcmalloc": os.path.join(LIBDIR, "libtcmalloc_minimal.so.4"),
}

# name, what it is, command (run in --work)
PROGRAMS = [
    ("py-trim", "CPython: a load spike, then malloc_trim through "
     "ctypes.CDLL(\"libc.so.6\")", [PY, os.path.join(PROGS, "py_trim.py")]),
    ("py-threads", "CPython: 4 threads build and drop lists of dicts",
     [PY, os.path.join(PROGS, "py_threads.py")]),
    ("sqlite3", "sqlite3 importing a 15,000-row CSV",
     ["sqlite3", "import.db", ".import --csv data.csv t"]),
    ("gzip", "gzip of a 38 MB text file", ["gzip", "-kf", "lines.txt"]),
    ("sort", "sort of 1,000,000 lines (38 MB)",
     ["sort", "-o", "sorted.txt", "lines.txt"]),
    ("git", "git add of 2,000 files in a new repository",
     ["git", "-C", "repo", "add", "-A"]),
    ("tar", "tar of 300 files (13 MB)", ["tar", "-cf", "tree.tar", "tree"]),
    ("perl", "perl building a hash of 40,000 keys",
     ["perl", "-e", "my %h; $h{\"key$_\"} = \"v\" x ($_ % 50) for "
      "1..40000; print scalar(keys %h), \"\\n\";"]),
    ("xz-T2", "xz -T2: threaded compression of the 38 MB file",
     ["xz", "-T2", "-6", "-kf", "lines.txt"]),
    ("sh-chain", "sh runs sort then gzip (fork + exec)",
     ["sh", "-c", "sort -o chain.txt lines.txt && gzip -kf chain.txt"]),
]


def prepare(work):
    """The inputs, made once per work directory from fixed seeds."""
    os.makedirs(work, exist_ok=True)
    lines = os.path.join(work, "lines.txt")
    if not os.path.exists(lines):
        r = random.Random(1)
        with open(lines, "w") as f:
            for _ in range(1000000):
                f.write("%016x %s\n" % (r.getrandbits(64), "x" * r.randint(0, 40)))
    csv = os.path.join(work, "data.csv")
    if not os.path.exists(csv):
        r = random.Random(2)
        with open(csv, "w") as f:
            f.write("id,name,value,note\n")
            for i in range(15000):
                f.write("%d,name%d,%f,%s\n" % (i, r.randint(0, 1 << 30),
                                               r.random() * 1000,
                                               "n" * r.randint(0, 30)))
    tree = os.path.join(work, "tree")
    if not os.path.isdir(tree):
        os.makedirs(tree)
        with open(lines, "rb") as f:
            data = f.read(300 * 300 * 301 // 2)
        for i in range(1, 301):
            with open(os.path.join(tree, "f%d.txt" % i), "wb") as f:
                f.write(data[:i * 300 * 150])
    repo = os.path.join(work, "repo")
    if not os.path.isdir(repo):
        os.makedirs(repo)
        subprocess.run(["git", "init", "-q", repo], check=True)
        r = random.Random(3)
        for i in range(2000):
            with open(os.path.join(repo, "f%d.txt" % i), "w") as f:
                f.write("file %d %d\n" % (i, r.getrandbits(32)) * (1 + i % 40))


def reset(name, work):
    """What a program's earlier run left that would change this one."""
    if name == "sqlite3":
        for f in ("import.db",):
            p = os.path.join(work, f)
            if os.path.exists(p):
                os.unlink(p)
    if name == "git":
        idx = os.path.join(work, "repo", ".git", "index")
        if os.path.exists(idx):
            os.unlink(idx)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_plain(name, cmd, work):
    """One run without capture: (wall s, CPU s).  The allocsim module, which
    does nothing outside a capture, is on PYTHONPATH as a user would have
    it."""
    reset(name, work)
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..",
                                                   "traces", "capture"))
    c0, t0 = children_cpu(), time.monotonic()
    subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL,
                   env=env)
    return time.monotonic() - t0, children_cpu() - c0


def store_meta(db, run, kv):
    """Adds what this script measured to a run's provenance (run_meta)."""
    with sqlite3.connect(db) as c:
        c.executemany("INSERT OR REPLACE INTO run_meta(run_id, key, value) "
                      "VALUES (?, ?, ?)",
                      [(run, k, str(v)) for k, v in kv.items()])


def allocsim_json(allocsim, *args):
    done = subprocess.run([allocsim, *args, "--json"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError("allocsim %s: %s" % (" ".join(args),
                                                done.stderr.strip()))
    return json.loads(done.stdout)


def summarize(c, name, proc, extra):
    """One compared process as a flat dict."""
    pk = c["peak_measured_rss_bytes"] or 1
    # Marks after the anchor (those before it measure start-up, which no
    # trace explains; the anchor's error is 0 by construction).
    anchor_t = c["baseline"]["anchor_t_ns"]
    marks = [m for m in c["marks"]
             if m["error_bytes"] is not None and m["t_ns"] > anchor_t]
    worst = max(marks, key=lambda m: abs(m["error_bytes"]), default=None)
    s = c["series"]
    a = c.get("allocator_series")
    out = {
        "program": name, "process": proc,
        "peak_mib": pk / 2**20,
        "peak_predicted_mib": c["peak_predicted_rss_bytes"] / 2**20,
        "anchor": c["baseline"]["anchor_label"],
        "startup_offset_mib": c["baseline"]["offset_bytes"] / 2**20,
        "worst_mark": worst["label"] if worst else None,
        "worst_mark_pct": 100 * worst["error_bytes"] / pk if worst else None,
        "median_pct": 100 * s["median_abs_error_bytes"] / pk,
        "p95_pct": 100 * s["p95_abs_error_bytes"] / pk,
        "max_pct": 100 * s["max_abs_error_bytes"] / pk,
        "max_note": s["max_error_note"],
        "points": s["points"],
    }
    if a is not None:
        out["other_growth_mib"] = a["final_other_growth_bytes"] / 2**20
        out["alloc_median_pct"] = 100 * a["median_abs_error_bytes"] / pk
        out["alloc_max_pct"] = 100 * a["max_abs_error_bytes"] / pk
        if marks:
            out["alloc_worst_mark_pct"] = max(
                (100 * m["allocator_error_bytes"] / pk for m in marks
                 if "allocator_error_bytes" in m), key=abs, default=None)
    out.update(extra)
    return out


def child_runs(db, parent):
    """{trace's real path: run} of the other processes capture stored."""
    base = os.path.dirname(os.path.realpath(db))
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT r.id, r.trace_path FROM runs r JOIN run_meta m"
                         " ON m.run_id = r.id AND m.key = 'capture_parent_run'"
                         " WHERE m.value = ?", (str(parent),)).fetchall()
    return {os.path.realpath(os.path.join(base, p)): i for i, p in rows}


def move_trace(db, run, path):
    """Points run at its trace's new path, stored as `allocsim record`
    stores it: relative to the store's directory when below it."""
    base = os.path.dirname(os.path.realpath(db))
    real = os.path.realpath(path)
    if real.startswith(base + os.sep):
        real = real[len(base) + 1:]
    with sqlite3.connect(db) as c:
        c.execute("UPDATE runs SET source = ?, trace_path = ? WHERE id = ?",
                  (real, real, run))


def capture(allocsim, db, traces, work, name, cmd, preload=None):
    """Captures one program, with preload's library in LD_PRELOAD when
    given; returns [(process, run id, trace, stats)]."""
    reset(name, work)
    stem = name + ("--" + preload if preload else "")
    out = os.path.join(traces, stem + ".astrace")
    summary = os.path.join(os.path.abspath(work), stem + ".summary")
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = PRELOADS[preload]
    c0, t0 = children_cpu(), time.monotonic()
    done = subprocess.run([allocsim, "capture", "-o", out, "--db", db,
                           "--summary", summary, "--", *cmd], cwd=work,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=env)
    wall, cpu = time.monotonic() - t0, children_cpu() - c0
    if done.returncode != 0:
        raise RuntimeError("capture %s: %s" % (name, done.stderr.strip()))
    text = open(summary).read()
    run = int(re.search(r"stored as measured run (\d+)", text).group(1))
    stats = {"events": 0, "trace_bytes": 0}
    m = re.search(r"trace bytes written: (\d+)", text)
    stats["trace_bytes"] = int(m.group(1)) if m else 0
    procs = []
    for m in re.finditer(r"^(\S+): pid \d+, (\d+) events", text, re.M):
        procs.append((m.group(1), int(m.group(2))))
    result = [(os.path.basename(cmd[0]), run, out,
               {"events": procs[0][1], "trace_bytes": stats["trace_bytes"],
                "capture_s": wall, "capture_cpu_s": cpu})]
    # Other processes: stored by the capture as runs of their own, their
    # traces renamed to NAME-EXE.astrace (their pids change from run to
    # run) and the runs pointed at the new names.
    stored = child_runs(db, run)
    for path, events in procs[1:]:
        meta = subprocess.run([allocsim, "convert", path, "-", "--format",
                               "text"], capture_output=True, text=True).stdout
        exe = re.search(r"^#@ exe=(.*)$", meta, re.M)
        proc = os.path.basename(exe.group(1)) if exe else "child"
        dest = os.path.join(traces, "%s-%s.astrace" % (stem, proc))
        shutil.move(path, dest)
        child = stored[os.path.realpath(path)]
        move_trace(db, child, dest)
        result.append((proc, child, dest,
                       {"events": events, "capture_s": wall}))
    return result


def table(rows):
    head = ("| program | process | events | trace bytes/event | slowdown | "
            "peak MiB measured → predicted | worst mark, % of peak | "
            "series median / max, % of peak | other growth MiB | allocator "
            "median / worst mark, % of peak |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        def pct(v):
            return "–" if v is None else "%+.2f" % v
        bpe = ("%.1f" % (r["trace_bytes"] / r["events"])
               if r.get("trace_bytes") and r["events"] else "–")
        slow = ("%.1f×" % (r["capture_s"] / r["plain_s"])
                if r.get("plain_s") else "–")
        worst = ("%s (%s)" % (pct(r["worst_mark_pct"]), r["worst_mark"])
                 if r["worst_mark"] else "– (anchor only)")
        lines.append("| %s | %s | %d | %s | %s | %.2f → %.2f | %s | "
                     "%.2f / %.2f%s | %s | %s |" % (
                         r["program"], r["process"], r["events"], bpe, slow,
                         r["peak_mib"], r["peak_predicted_mib"], worst,
                         r["median_pct"], r["max_pct"],
                         " (%s)" % r["max_note"] if r["max_note"] else "",
                         "%+.2f" % r["other_growth_mib"]
                         if "other_growth_mib" in r else "–",
                         "%.2f / %s" % (r["alloc_median_pct"],
                                        pct(r.get("alloc_worst_mark_pct")))
                         if "alloc_median_pct" in r else "–"))
    return "\n".join(lines)


def capture_and_compare(allocsim, db, traces, work, order, program, preload,
                        plain_times):
    """Captures program (name, what, cmd), stores what this script measured
    with each process's run and compares it; returns the rows."""
    name, what, cmd = program
    plain, plain_cpu = plain_times
    rows = []
    for proc, run, trace, stats in capture(allocsim, db, traces, work, name,
                                           cmd, preload):
        main_proc = proc == os.path.basename(cmd[0])
        meta = {"program": name, "program_process": proc,
                "program_events": stats["events"]}
        if preload:
            meta.update(program_preload=preload, program_preload_order=order)
        else:
            meta["program_order"] = order
        if main_proc:
            meta.update(plain_wall_s="%.6f" % plain,
                        plain_cpu_s="%.6f" % plain_cpu,
                        capture_cpu_s="%.6f" % stats["capture_cpu_s"])
        store_meta(db, run, meta)
        c = allocsim_json(allocsim, "compare", str(run), "--db", db,
                          "--no-store")
        stats["plain_s"] = plain if main_proc else None
        r = summarize(c, name, proc, dict(stats, run=run, preload=preload,
                                          trace=os.path.basename(trace),
                                          what=what))
        rows.append(r)
        print(json.dumps(r), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("allocsim")
    ap.add_argument("--db", required=True)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only")
    ap.add_argument("--allocators", default="glibc")
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    preloads = [None if p == "glibc" else p for p in a.allocators.split(",")]
    for p in preloads:
        if p is not None and (p not in PRELOADS or
                              not os.path.exists(PRELOADS[p])):
            ap.error("--allocators: %s: expected glibc or one of %s, "
                     "installed" % (p, ", ".join(sorted(PRELOADS))))
    allocsim = os.path.abspath(a.allocsim)
    db, traces = os.path.abspath(a.db), os.path.abspath(a.traces)
    os.makedirs(traces, exist_ok=True)
    prepare(a.work)
    only = set(a.only.split(",")) if a.only else None
    rows = []
    for order, (name, what, cmd) in enumerate(PROGRAMS):
        if only and name not in only:
            continue
        plain, plain_cpu = run_plain(name, cmd, a.work)
        for preload in preloads:
            rows += capture_and_compare(allocsim, db, traces, a.work, order,
                                        (name, what, cmd), preload,
                                        (plain, plain_cpu))
    if a.table:
        print(table(rows))


if __name__ == "__main__":
    sys.exit(main())
