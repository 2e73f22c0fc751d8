#!/usr/bin/env python3
"""scripts/measure/tcmusl_tables.py -- the validation tables of
docs/models/tcmalloc.md and docs/models/musl.md, from the store.

For every measured run in DB whose trace or workload matches one of the
PATTERNs (substrings; default: the tcmalloc and musl runs), runs
`allocsim compare RUN --db DB --no-store --json` and prints one markdown row:
the run, measured -> predicted RSS at each mark (MiB), the worst error at a
mark and over the series (% of the measured peak), and the series' points.

usage: tcmusl_tables.py [--db data/reference.db] [--allocsim build/cli/allocsim]
                        [PATTERN ...]
"""

import argparse
import json
import os
import subprocess
import sys

MIB = 1024.0 * 1024.0


def allocsim_json(allocsim, *args):
    out = subprocess.run([allocsim, *args, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def row(allocsim, db, run):
    c = allocsim_json(allocsim, "compare", str(run["id"]), "--db", db,
                      "--no-store")
    peak = c["peak_measured_rss_bytes"]
    marks = " / ".join("%s %.2f&rarr;%.2f" % (m["label"],
                                              m["measured_rss_bytes"] / MIB,
                                              m["predicted_rss_bytes"] / MIB)
                       for m in c["marks"])
    worst = max(abs(m["error_pct_of_peak"]) for m in c["marks"])
    s = c["series"]
    series = (100.0 * s["max_abs_error_bytes"] / peak
              if s["points"] and peak else float("nan"))
    name = os.path.basename(run.get("trace_path") or run["source"] or "")
    if not name:
        name = run["source"]
    return "| %s | %s | %.2f%% | %.2f%% (%d) |" % (name, marks, worst, series,
                                                  s["points"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap.add_argument("--db", default=os.path.join(root, "data", "reference.db"))
    ap.add_argument("--allocsim",
                    default=os.path.join(root, "build", "cli", "allocsim"))
    ap.add_argument("patterns", nargs="*", default=["tcmalloc", "musl"])
    a = ap.parse_args()
    runs = allocsim_json(a.allocsim, "runs", "--db", a.db)["runs"]
    print("| run | mark: measured&rarr;predicted MiB | worst mark | "
          "series max (points) |")
    print("|---|---|---:|---:|")
    for run in runs:
        if run["kind"] != "measured":
            continue
        what = " ".join(str(run.get(k) or "") for k in
                        ("trace_path", "source", "model", "options"))
        if any(p in what for p in a.patterns):
            print(row(a.allocsim, a.db, run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
