#!/usr/bin/env python3
"""scripts/measure/compare_survivors.py -- measured survivors runs against
the simulation and the formula.

For every measured-run file (written by scripts/measure/survivors.py) it
replays the workload its provenance names (#@ workload=...) with
`allocsim sweep` (one point; the same generator `allocsim run` uses, which
also reports pymalloc arenas still pinned) against the model the file names
(#@ model=cpython:version=3.11), and the (1 - p)^k formula.  It prints a
markdown table of kept memory (RSS at `after` minus RSS at `start`) and,
for runs with a reuse phase, the growth from `after` to `after_reuse`,
with errors and mean absolute errors.

usage: compare_survivors.py [--allocsim PATH] [--model SPEC] [FILE ...]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

MIB = 1048576.0


def read_measured(path):
    meta, marks, last = {}, {}, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#@ "):
                k, _, v = line[3:].partition("=")
                meta[k.strip()] = v.strip()
                continue
            if not line or line.startswith("#") or line.startswith("allocsim"):
                continue
            parts = line.split()
            if parts[2] == "mark":
                last = parts[3]
            elif parts[2] == "rss" and last is not None:
                marks[last] = int(parts[3])
                last = None
    return meta, marks


def simulate(allocsim, workload, model):
    args = workload.split()
    assert args[0] == "survivors", workload
    opts = dict(zip(args[1::2], args[2::2]))
    total = opts.pop("--total", "256")
    # Four layouts: mmap_top lowered by 0..12 KiB, the four ways ASLR can
    # place mappings modulo a 16 KiB pool (which decides the arenas that
    # are 16 KiB aligned).  Offset 0 is the default layout.
    cmd = [allocsim, "sweep", "survivors", "--vary", f"total={total}",
           "--vary", "mmap_offset=0,4096,8192,12288",
           "--model", model, "--jobs", "2", "--json"]
    for k, v in opts.items():
        cmd += [k, v]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    pts = json.loads(out.stdout)["points"]
    pt = pts[0]
    kept = [q["kept_bytes"] / MIB for q in pts]
    pt["layouts"] = (min(kept), max(kept), sum(kept) / len(kept))
    return pt, opts, total


def formula(allocsim, opts, total):
    cmd = [allocsim, "formula", "--total", total,
           "--size", opts.get("--size", "64"),
           "--pattern", opts.get("--pattern", "random")]
    if opts.get("--pattern") == "stride":
        cmd += ["--every", opts.get("--every", "1000")]
    else:
        cmd += ["--fraction", opts.get("--fraction", "1e-4")]
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


def describe(opts):
    pat = opts.get("--pattern", "random")
    size = opts.get("--size", "64")
    if pat == "stride":
        what = f"every {opts.get('--every')}th"
    elif pat == "oldest":
        what = f"oldest {float(opts.get('--fraction')):g}"
    else:
        what = f"random {float(opts.get('--fraction')):g}"
    return f"{size} B {what}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocsim",
                    default=os.path.join(root, "build", "sim", "cli",
                                         "allocsim"))
    ap.add_argument("--model", default=None,
                    help="model spec (default: the file's #@ model)")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or glob.glob(os.path.join(
        root, "data", "measured", "survivors-*.trace"))

    def order(path):
        m = read_measured(path)[0].get("workload", "").split()
        o = dict(zip(m[1::2], m[2::2]))
        return (int(o.get("--size", 0)), o.get("--pattern", ""),
                float(o.get("--fraction", 0)), "--reuse-size" in o)
    files = sorted(files, key=order)
    if not files:
        sys.exit("compare_survivors.py: no measured files")

    rows, reuse_rows = [], []
    for path in files:
        meta, marks = read_measured(path)
        model = a.model or meta.get("model", "cpython:version=3.11")
        pt, opts, total = simulate(a.allocsim, meta["workload"], model)
        f = formula(a.allocsim, opts, total)
        m_kept = (marks["after"] - marks["start"]) / MIB
        s_kept = pt["kept_bytes"] / MIB
        f_kept = f["kept_mib"] if f else None
        f_sd = f["sd_mib"] if f else None
        m_arenas = meta.get("pymalloc_after", "")
        m_start = meta.get("pymalloc_start", "")

        def arenas(s):
            for w in s.split():
                if w.startswith("arenas="):
                    return int(w[7:])
            return None
        ma = arenas(m_arenas)
        ms = arenas(m_start)

        def field(s, name):
            for w in s.split():
                if w.startswith(name + "="):
                    return int(w[len(name) + 1:])
            return None
        m_peak_s = meta.get("pymalloc_peak", "")
        try:
            m_unal = (field(m_peak_s, "unaligned") - field(m_start, "unaligned"))
            m_new = field(m_peak_s, "arenas") - field(m_start, "arenas")
            m_align = f"{m_new - m_unal}/{m_new}"
        except TypeError:
            m_align = "?"
        s_align = (f"{pt['arenas_peak'] - pt['unaligned_peak']}/"
                   f"{pt['arenas_peak']}" if "arenas_peak" in pt else "?")
        if "--reuse-size" in opts:
            opts_case = describe(opts) + " (reuse run)"
        else:
            opts_case = describe(opts)
        rows.append(dict(case=opts_case, file=os.path.basename(path),
                         measured=m_kept, simulated=s_kept, formula=f_kept,
                         sd=f_sd,
                         m_arenas=(ma - ms) if ma is not None and ms is not None
                         else None,
                         s_arenas=pt.get("arenas_pinned"),
                         align=f"{m_align} / {s_align}",
                         layout=meta.get("layout_pinned_runs", "-"),
                         layouts=pt["layouts"],
                         m_peak=(marks["peak"] - marks["start"]) / MIB,
                         s_peak=pt["rss_peak_bytes"] / MIB))
        if "after_reuse" in marks:
            reuse_rows.append(dict(
                case=describe(opts) + f", then {opts.get('--reuse-total', '256')}"
                f" MiB of {opts['--reuse-size']} B",
                measured=(marks["after_reuse"] - marks["after"]) / MIB,
                simulated=pt["reuse_growth_bytes"] / MIB))

    print("| case | measured kept | simulated | formula (sd) | sim - meas |"
          " formula - meas | new arenas at after, measured / simulated |"
          " pinned given the measured layout |"
          " simulated over 4 layouts, min-max (mean) |"
          " aligned arenas at peak, measured / simulated |"
          " peak measured / simulated |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    se, fe, fn, sl = 0.0, 0.0, 0, 0.0
    for r in rows:
        ferr = "-" if r["formula"] is None else f"{r['formula'] - r['measured']:+.2f}"
        fcol = "-" if r["formula"] is None else f"{r['formula']:.2f} ({r['sd']:.2f})"
        print(f"| {r['case']} | {r['measured']:.2f} | {r['simulated']:.2f} |"
              f" {fcol} | {r['simulated'] - r['measured']:+.2f} | {ferr} |"
              f" {r['m_arenas']} / {r['s_arenas']} | {r['layout']} |"
              f" {r['layouts'][0]:.2f}-{r['layouts'][1]:.2f}"
              f" ({r['layouts'][2]:.2f}) |"
              f" {r['align']} |"
              f" {r['m_peak']:.2f} / {r['s_peak']:.2f} |")
        se += abs(r["simulated"] - r["measured"])
        sl += abs(r["layouts"][2] - r["measured"])
        if r["formula"] is not None:
            fe += abs(r["formula"] - r["measured"])
            fn += 1
    print(f"\nMean absolute error over {len(rows)} points: simulated "
          f"(default layout) {se / len(rows):.2f} MiB; simulated (mean of 4 "
          f"layouts) {sl / len(rows):.2f} MiB; formula "
          f"{fe / max(fn, 1):.2f} MiB ({fn} points).")
    if reuse_rows:
        print("\n| reuse case | measured growth | simulated | sim - meas |")
        print("|---|---:|---:|---:|")
        for r in reuse_rows:
            print(f"| {r['case']} | {r['measured']:.2f} | {r['simulated']:.2f}"
                  f" | {r['simulated'] - r['measured']:+.2f} |")


if __name__ == "__main__":
    main()
