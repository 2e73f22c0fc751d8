"""scripts/measure/oracle/jemalloc_seeds.py -- what replaying jemalloc with
the seeds and clock of the run changes: each workload and trace of run.py
is replayed on the real jemalloc (allocsim oracle, which records every
thread's tsd address, every arena's decay_t address and the coarse clock's
phase; traces/je_seeds.h), then compared three times with the jemalloc
model: with everything the run recorded; with the main thread's and arena
0's seeds and the clock only (the trace's seed.* options left out: the
other threads and arenas take the model's fixed offsets from those two);
and with the model's fixed default seeds and the trace's own clock.
Prints a Markdown table: the largest |predicted - measured| at any mark or
sample, % of the oracle's peak net of its baseline (the oracle tables'
measure, scripts/docs/validation_tables.py).

Usage: jemalloc_seeds.py ALLOCSIM [WORKDIR]
Needs Debian's libjemalloc2.  Each run replays at the machine's pace, so
run it on an idle machine: decay reads the clock.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import run as oracle_run  # noqa: E402  (the cases run.py measures)

# The model as it replays a run that recorded nothing: the default seeds
# (models/jemalloc.c JO_PRNG_SEED, JO_JITTER_SEED) and the trace's clock.
UNSEEDED = ("jemalloc:prng_seed=140737354006784,jitter_seed=140737345617920,"
            "clock_res_ns=0,clock_lag_ns=0,clock_init_ns=0")


def worst_pct(cmp):
    errs = [abs(m["error_bytes"]) for m in cmp["marks"]
            if m.get("error_bytes") is not None]
    errs += [abs(p - m) for _, m, p in cmp["series"]["samples"]]
    peak = cmp["peak_measured_rss_bytes"] - cmp["baseline"]["offset_bytes"]
    return 100.0 * max(errs) / max(1, peak)


def workload_threads(line):
    """Trace threads of a workload line: lab-arenas runs 64."""
    words = line.split()
    if "--threads" in words:
        return words[words.index("--threads") + 1]
    return "64" if words[0] == "lab-arenas" else "1"


def inputs(work):
    """(name, trace threads, oracle arguments) of run.py's workloads and
    traces (an import puts every call on thread 0)."""
    out = [(name, workload_threads(line),
            ["--workload", line, "--sample-every", "0"])
           for name, line in oracle_run.WORKLOADS]
    imported = os.path.join(ROOT, "data", "imported")
    for f in sorted(os.listdir(imported)):
        if f.endswith(".astrace"):
            out.append((f[:-len(".astrace")], "1",
                        [os.path.join(imported, f), "--lenient"]))
    for name, seed, events, threads in oracle_run.RANDOM:
        path = os.path.join(work, name + ".trace")
        subprocess.run([sys.executable, os.path.join(HERE, "random_trace.py"),
                        path, str(seed), str(events), str(threads)],
                       check=True)
        out.append((name, str(threads), [path, "--lenient"]))
    for name, seed in oracle_run.PHASED:
        path = os.path.join(work, name + ".trace")
        subprocess.run([sys.executable, os.path.join(HERE, "phased_trace.py"),
                        path, str(seed)], check=True)
        out.append((name, "1-6", [path, "--lenient"]))
    return out


def without_seed_options(allocsim, trace, out):
    """trace with its seed.* option events left out, written to out (text)."""
    text = out + ".full.txt"
    subprocess.run([allocsim, "convert", trace, text], check=True,
                   capture_output=True)
    with open(text) as src, open(out, "w") as dst:
        dst.writelines(l for l in src if " option seed." not in l)
    os.remove(text)


def compare(allocsim, db, *model):
    r = subprocess.run([allocsim, "compare", "1", "--db", db, "--json",
                        "--no-store"] + (["--model", model[0]] if model else []),
                       capture_output=True, text=True, check=True)
    return worst_pct(json.loads(r.stdout))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    allocsim = os.path.abspath(sys.argv[1])
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    print("| case | trace threads | every seed recorded, and the clock | "
          "main thread's and arena 0's, and the clock | default seeds, "
          "trace's clock |")
    print("|---|---:|---:|---:|---:|")
    for name, threads, args in inputs(work):
        out = os.path.join(work, name + ".astrace")
        main_only = os.path.join(work, name + ".main-seeds.trace")
        db = os.path.join(work, name + ".db")
        db_main = os.path.join(work, name + ".main-seeds.db")
        for f in (out, main_only, db, db_main):
            if os.path.exists(f):
                os.remove(f)
        subprocess.run([allocsim, "oracle"] + args +
                       ["--allocator", "jemalloc", "--idle-scale", "0",
                        "-o", out], check=True, capture_output=True)
        without_seed_options(allocsim, out, main_only)
        for trace, store in ((out, db), (main_only, db_main)):
            subprocess.run([allocsim, "record", trace, "--db", store],
                           check=True, capture_output=True)
        print("| %s | %s | %.2f%% | %.2f%% | %.2f%% |" % (
            name, threads, compare(allocsim, db), compare(allocsim, db_main),
            compare(allocsim, db_main, UNSEEDED)), flush=True)


if __name__ == "__main__":
    main()
