#!/usr/bin/env python3
"""scripts/measure/glibc_tables.py -- the tables of docs/glibc-validation.md.

For every measured-run file in data/measured/ made by spike.py or the C labs
(spike-*.trace, lab-*.trace), records it into a scratch store and runs
`allocsim compare RUN --json --no-store`, which replays the workload named by
the file's provenance with its model and libc spec and aligns marks by label
(predicted = simulated + measured(start) - simulated(start)).  Prints
markdown: one row per variant and mark, with the measured and predicted RSS
of repeat 1, the error as % of the measured peak, and the largest |error|
over all repeats of the variant.  Also prints the published (load-spike study)
comparison (spike --python 3.14 on cpython:version=3.14), with start =
21 MiB and with the start shift measured by baseline.py.

Usage: glibc_tables.py ALLOCSIM [DATADIR]
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

MIB = 1024.0 * 1024.0

# The load-spike study's table: variant -> (peak, after_free, after_trim),
# MiB; start 21.
PUBLISHED = {
    "default": (396, 395, 57),
    "threads16": (396, 396, 58),
    "threads16-arenamax2": (396, 396, 57),
    "mmap512": (508, 265, 61),
    "trim131072": (396, 395, 57),
}
PUB_START = 21.0


def compare(allocsim, db, path):
    out = subprocess.run([allocsim, "record", path, "--db", db, "--json"],
                         check=True, capture_output=True, text=True).stdout
    run = json.loads(out)["run"]
    out = subprocess.run([allocsim, "compare", str(run), "--db", db,
                          "--json", "--no-store"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def variant_of(path):
    name = os.path.basename(path)[:-len(".trace")]
    return re.sub(r"-r\d+$", "", name)


def main():
    allocsim = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "..", "..", "data", "measured")
    files = sorted(glob.glob(os.path.join(data, "spike-*.trace")) +
                   glob.glob(os.path.join(data, "lab-*.trace")))
    by_variant = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "v.db")
        for f in files:
            by_variant.setdefault(variant_of(f), []).append(
                (os.path.basename(f), compare(allocsim, db, f)))

    print("| variant | mark | measured MiB | predicted MiB | error MiB |"
          " error % of peak | max abs error over repeats, % of peak |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for v, runs in by_variant.items():
        first = runs[0][1]
        for i, m in enumerate(first["marks"]):
            worst = max(abs(r["marks"][i]["error_pct_of_peak"])
                        for _, r in runs)
            print("| %s | %s | %.1f | %.1f | %+.2f | %+.2f%% | %.2f%% (%d runs) |"
                  % (v, m["label"], m["measured_rss_bytes"] / MIB,
                     m["predicted_rss_bytes"] / MIB, m["error_bytes"] / MIB,
                     m["error_pct_of_peak"], worst, len(runs)))

    if "lab-arenas-control" in by_variant:
        def median_running(v):
            d = sorted(r["marks"][1]["measured_rss_bytes"] -
                       r["marks"][0]["measured_rss_bytes"]
                       for _, r in by_variant[v])
            return d[len(d) // 2]
        control = median_running("lab-arenas-control")
        print()
        print("| lab 5 setting | measured: median RSS(running) - RSS(start),"
              " KiB | minus control median, KiB | simulated, KiB |"
              " error, KiB |")
        print("|---|---:|---:|---:|---:|")
        for v in ("lab-arenas-control", "lab-arenas", "lab-arenas-arenamax8",
                  "lab-arenas-arenamax1"):
            first = by_variant[v][0][1]
            sim = (first["marks"][1]["predicted_rss_bytes"] -
                   first["baseline"]["offset_bytes"])
            med = median_running(v)
            print("| %s | %d | %d | %d | %+d |"
                  % (v, med / 1024, (med - control) / 1024, sim / 1024,
                     (sim - (med - control)) / 1024))

    def baseline(v):
        vals = []
        for f in sorted(glob.glob(os.path.join(data, "baseline-%s-r*.trace"
                                               % v))):
            for line in open(f):
                if " rss " in line:
                    vals.append(int(line.split()[3]))
        vals.sort()
        return vals[len(vals) // 2] / MIB if vals else None

    shift = {"mmap512": 0.0}
    if baseline("mmap512") is not None and baseline("default") is not None:
        shift["mmap512"] = baseline("mmap512") - baseline("default")
    print()
    print("Start shift measured here (baseline.py, median): MALLOC_MMAP_"
          "THRESHOLD_=512 adds %.1f MiB." % shift["mmap512"])
    print()
    print("| variant | mark | published MiB | predicted MiB (21 + simulated)"
          " | error MiB | error % of published | predicted with measured"
          " start shift | error % | simulated delta MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for v, pub in PUBLISHED.items():
        # The load-spike study ran Python 3.14: replay 3.14's requests on the
        # 3.14 model.
        args = [allocsim, "run", "spike", "--python", "3.14"]
        if v.startswith("threads16"):
            args += ["--threads", "16"]
        libc = "glibc:ncpus=2" + {"threads16-arenamax2": ",arena_max=2",
                                  "mmap512": ",mmap_threshold=512",
                                  "trim131072": ",trim_threshold=131072"
                                  }.get(v, "")
        args += ["--model", "cpython:version=3.14", "--libc", libc, "--json"]
        run = json.loads(subprocess.run(args, check=True, capture_output=True,
                                        text=True).stdout)
        for i, label in enumerate(("peak", "after_free", "after_trim")):
            m = run["marks"][i + 1]
            assert m["label"] == label
            delta = m["rss_bytes"] / MIB
            pred = PUB_START + delta
            pred2 = pred + shift.get(v, 0.0)
            print("| %s | %s | %d | %.1f | %+.1f | %+.1f%% | %.1f | %+.1f%%"
                  " | %.1f |"
                  % (v, label, pub[i], pred, pred - pub[i],
                     100.0 * (pred - pub[i]) / pub[i], pred2,
                     100.0 * (pred2 - pub[i]) / pub[i], delta))


if __name__ == "__main__":
    main()
