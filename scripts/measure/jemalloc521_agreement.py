#!/usr/bin/env python3
"""How often the jemalloc model, run as 5.2.1, agrees with a real 5.2.1.

    scripts/measure/jemalloc521_agreement.py [--doc FILE]
        --column LABEL LIB TEST RUNS [--column ...]

Each column runs TEST (tests/validation/test_jemalloc_differential, or a
copy linked against another userland by scripts/measure/distro_debs.sh's
link_test) RUNS times with ALLOCSIM_JEMALLOC_521_LIB=LIB and
ALLOCSIM_JEMALLOC_521_ALL=1, and counts, for each of the six differential
configurations, the runs in which every checkpoint was equal.  Each run is
a fresh process with its own address layout: 5.2.1 merges extents of
neighbouring mappings, so agreement depends on where mappings land.

Prints the table; with --doc, also writes it into FILE between the lines
<!-- BEGIN TABLE jemalloc521-agreement ... --> and <!-- END TABLE
jemalloc521-agreement --> (docs/models/jemalloc.md), so that the page's
figures are this script's output.
"""
import argparse
import os
import re
import subprocess
import sys

CONFIGS = [
    ("no_retain", "`no_retain`"),
    ("decay_slow", "`decay_slow`"),
    ("decay_0", "`decay_0`"),
    ("decay_never", "`decay_never`"),
    ("no_tcache", "`no_tcache`"),
    ("one_arena", "`one_arena` (`lg_tcache_max:12`)"),
]
TABLE = "jemalloc521-agreement"


def count_agreement(label, lib, test, runs):
    """Runs in which each configuration was equal at every checkpoint."""
    env = dict(os.environ, ALLOCSIM_JEMALLOC_521_LIB=lib,
               ALLOCSIM_JEMALLOC_521_ALL="1")
    ok = {name: 0 for name, _ in CONFIGS}
    for _ in range(runs):
        out = subprocess.run([test], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout
        if not re.search(r"^\[ +(OK|FAILED) +\] v521_", out, re.M):
            # a skip (not 5.2.1, not loadable) would read as 0 agreements
            sys.exit("--column %s: %s ran no 5.2.1 configuration with %s; "
                     "its last lines:\n%s" %
                     (label, test, lib, "\n".join(out.splitlines()[-5:])))
        for name in ok:
            if re.search(r"^\[ +OK +\] v521_%s$" % name, out, re.M):
                ok[name] += 1
    return ok


def markdown(columns, counts):
    head = "| configuration | " + " | ".join(
        "%s, %d runs" % (label, runs) for label, _, _, runs in columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    rows = ["| %s | %s |" % (shown, " | ".join(str(c[name]) for c in counts))
            for name, shown in CONFIGS]
    return "\n".join([head, rule] + rows) + "\n"


def write_doc(path, table):
    text = open(path).read()
    begin = re.search(r"^<!-- BEGIN TABLE %s[^\n]*-->\n" % TABLE, text, re.M)
    end = re.search(r"^<!-- END TABLE %s -->\n" % TABLE, text, re.M)
    if begin is None or end is None or end.start() < begin.end():
        sys.exit("%s: no BEGIN/END TABLE %s markers" % (path, TABLE))
    text = text[:begin.end()] + table + text[end.start():]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--column", nargs=4, action="append", required=True,
                    metavar=("LABEL", "LIB", "TEST", "RUNS"),
                    help="a column: its heading, the 5.2.1 library, the "
                    "test binary and how many runs")
    ap.add_argument("--doc", help="write the table into this page")
    args = ap.parse_args()
    columns = []
    for label, lib, test, runs in args.column:
        if not os.path.isfile(lib):
            ap.error("--column %s: %s: no such library" % (label, lib))
        if not os.access(test, os.X_OK):
            ap.error("--column %s: %s: not an executable test" % (label, test))
        if not runs.isdigit() or int(runs) < 1:
            ap.error("--column %s: RUNS expects a positive count, got %r" %
                     (label, runs))
        columns.append((label, lib, test, int(runs)))
    counts = [count_agreement(label, lib, test, runs)
              for label, lib, test, runs in columns]
    table = markdown(columns, counts)
    print(table, end="")
    if args.doc:
        write_doc(args.doc, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
