#!/usr/bin/env python3
"""scripts/compare_all.py -- one line per measured run in a store: replays it
with `allocsim compare --no-store --json` and prints the worst per-mark error.

usage: compare_all.py ALLOCSIM DB
"""
import json
import subprocess
import sys


def allocsim_json(allocsim, *args):
    """The command's JSON, or its error message as a string."""
    done = subprocess.run([allocsim, *args, "--json"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        return done.stderr.strip()
    return json.loads(done.stdout)


def main():
    allocsim, db = sys.argv[1], sys.argv[2]
    runs = [r for r in allocsim_json(allocsim, "runs", "--db", db)["runs"]
            if r["kind"] == "measured"]
    print(f"{'run':>4}  {'source':<44} {'model':<22} {'marks':>5} "
          f"{'peak MiB':>9} {'max err MiB':>11} {'max err %peak':>13}")
    worst = 0.0
    skipped = 0
    for r in runs:
        c = allocsim_json(allocsim, "compare", str(r["id"]), "--db", db,
                          "--no-store")
        source = r["source"].split("/")[-1]
        if isinstance(c, str):
            skipped += 1
            continue
        marks = c["marks"]
        err = max(marks, key=lambda m: abs(m["error_bytes"]))
        worst = max(worst, abs(err["error_pct_of_peak"]))
        print(f"{r['id']:>4}  {source[:44]:<44} {c['model'][:22]:<22} "
              f"{len(marks):>5} {c['peak_measured_rss_bytes'] / 2**20:>9.2f} "
              f"{err['error_bytes'] / 2**20:>+11.2f} "
              f"{err['error_pct_of_peak']:>+12.2f}%")
    print(f"\n{len(runs) - skipped} measured runs replayed ({skipped} "
          f"start-up baselines have nothing to replay); worst per-mark "
          f"error {worst:.2f}% of the run's measured peak")


if __name__ == "__main__":
    main()
