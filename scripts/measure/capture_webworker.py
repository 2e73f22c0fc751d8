#!/usr/bin/env python3
"""scripts/measure/capture_webworker.py -- the full-size webworker workload
(scripts/measure/webworker.py: 96,000 + 48,000 requests) run plain and
under `allocsim capture` at 1, 16 and 64 threads: trace size, events,
bytes per event and slowdown, then each capture compared with the model.

    capture_webworker.py ALLOCSIM --dir DIR [--threads 1,16,64]   # measure
    capture_webworker.py --table DIR                               # table

Measuring writes into DIR (a scratch directory: each trace takes about
1.4 GB): plain-tT.{measured.trace,out,time} and
m-tT.{astrace,summary,time}, the captures stored in DIR/runs.db, and
cmp-tT.txt (`allocsim compare`).  Times come from /usr/bin/time (wall,
user + system CPU of the whole command: the program and, for a capture,
allocsim capture's converter).  --table prints the Markdown table of
docs/capture.md from those files.  Run under `nice`; a capture at 64
threads takes about 3 minutes here.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
TIME_FMT = "%e s wall, %U+%S s cpu"


def timed(cmd, time_file, out_file, env=None):
    with open(out_file, "w") as out:
        subprocess.run(["/usr/bin/time", "-o", time_file, "-f", TIME_FMT,
                        "nice", *cmd], stdout=out, env=env, check=True)


def measure(allocsim, d, threads):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..",
                                                   "traces", "capture"))
    ww = os.path.join(HERE, "webworker.py")
    db = os.path.join(d, "runs.db")
    for t in threads:
        timed([PY, ww, "--out", os.path.join(d, "plain-t%d.measured.trace" % t),
               "--threads", str(t)], os.path.join(d, "plain-t%d.time" % t),
              os.path.join(d, "plain-t%d.out" % t), env)
        timed([allocsim, "capture", "-o", os.path.join(d, "m-t%d.astrace" % t),
               "--db", db, "--summary", os.path.join(d, "m-t%d.summary" % t),
               "--", PY, ww, "--out",
               os.path.join(d, "m-t%d.measured.trace" % t), "--threads",
               str(t)], os.path.join(d, "m-t%d.time" % t),
              os.path.join(d, "m-t%d.out" % t))
        text = open(os.path.join(d, "m-t%d.summary" % t)).read()
        run = re.search(r"stored as measured run (\d+)", text).group(1)
        with open(os.path.join(d, "cmp-t%d.txt" % t), "w") as out:
            subprocess.run(["nice", allocsim, "compare", run, "--db", db,
                            "--no-store"], stdout=out, check=True)


def read_time(path):
    m = re.search(r"([\d.]+) s wall, ([\d.]+)\+([\d.]+) s cpu",
                  open(path).read())
    return float(m.group(1)), float(m.group(2)) + float(m.group(3))


def table(d):
    rows = ["| threads | events | trace GB | bytes/event | plain s wall (CPU) "
            "| capture s wall (CPU) | slowdown wall (CPU) | worst mark after "
            "`__main__`, % of peak |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in sorted(int(m.group(1)) for m in
                    (re.match(r"m-t(\d+)\.summary$", f)
                     for f in os.listdir(d)) if m):
        s = open(os.path.join(d, "m-t%d.summary" % t)).read()
        events = int(re.search(r"pid \d+, (\d+) events", s).group(1))
        tbytes = int(re.search(r"trace bytes written: (\d+)", s).group(1))
        pw, pc = read_time(os.path.join(d, "plain-t%d.time" % t))
        cw, cc = read_time(os.path.join(d, "m-t%d.time" % t))
        worst = "–"
        cmp_file = os.path.join(d, "cmp-t%d.txt" % t)
        if os.path.exists(cmp_file):
            worst = worst_mark(open(cmp_file).read())
        rows.append("| %d | %d | %.2f | %.2f | %.1f (%.1f) | %.1f (%.1f) | "
                    "%.1f× (%.1f×) | %s |" % (
                        t, events, tbytes / 1e9, tbytes / events, pw, pc, cw,
                        cc, cw / pw, cc / pc, worst))
    return "\n".join(rows)


def worst_mark(text):
    """The largest |error| % of peak among marks after __main__ in an
    `allocsim compare` table."""
    after, best = False, None
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "__main__":
            after = True
            continue
        pct = [x for x in f if x.endswith("%")]
        if after and pct and re.match(r"[a-z_]+$", f[0]) and f[0] != "mark":
            v = float(pct[0].rstrip("%"))
            if best is None or abs(v) > abs(best[1]):
                best = (f[0], v)
    return "–" if best is None else "%+.2f%% (%s)" % (best[1], best[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("allocsim", nargs="?")
    ap.add_argument("--dir")
    ap.add_argument("--threads", default="1,16,64")
    ap.add_argument("--table")
    a = ap.parse_args()
    if a.table:
        print(table(a.table))
        return 0
    if not a.allocsim or not a.dir:
        ap.error("ALLOCSIM and --dir are required to measure")
    os.makedirs(a.dir, exist_ok=True)
    measure(os.path.abspath(a.allocsim), a.dir,
            [int(x) for x in a.threads.split(",")])
    print(table(a.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
