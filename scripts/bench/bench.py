#!/usr/bin/env python3
"""The one source of allocsim's benchmark figures (scripts/bench.sh runs it).

Generates the fixed benchmark traces deterministically (`allocsim convert
--workload`), replays each with every registered model (`allocsim replay
--json`) and on every real allocator the oracle covers that a model stands
for (`allocsim oracle --sample-every 0 --json`, whose replayer reports the
CPU time of the calls alone), interleaved over --runs rounds, and reports
medians:

  events/s and ns/event   CPU time (user + system) of the whole replay
                          process, trace decoding included, per event
  instructions/event      `perf stat -e instructions:u`, where the machine
                          has the counter (null otherwise)
  sim_max_rss_bytes       the simulator's own peak RSS (ru_maxrss)
  simulated_peak_rss_bytes  the peak RSS the model predicts
  real_ns_per_event       the real allocator's CPU time in the same calls
                          (each allocation written whole, as the program
                          would), per trace event; null where no native
                          replayer stands for the model

and, besides the cases, the survivors grid's wall and CPU time with --jobs
1 and 2 ("grid") and tests/bench/bench_trace_decode's decoding rate
("decode").

CPU time rather than wall time: the machine is shared and the process's CPU
time is what moves least when other work runs beside it.

  scripts/bench.sh [--json] [--runs N] [--real-runs N] [--quick] [--big]
                   [--dir DIR]
                   [--doc docs/benchmarks.md] [--from FILE.json]
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (name, workload line, what it is).  --quick divides the churn steps by 20.
TRACES = [
    ("survivors", "survivors --size 64 --total 256",
     "the survivors study's point: 256 MiB of 64 B objects built, 1e-4 kept"),
    ("spike", "spike",
     "the load-spike study: 160,000 tuples, 2 % kept, gc.collect, malloc_trim(0)"),
    ("churn", "churn --live 50000 --steps 5000000",
     "50,000 live objects of mixed sizes (16 B-512 KiB), 5 M replacements"),
    ("synthetic", "churn --live 10000 --steps 51600000 --sizes small",
     "100 M events: 10,000 live objects of 16 B-4 KiB replaced at random"),
]

# Heaps larger than most machines' memory (--big): streamed from the
# generator (a 64 GiB trace file would itself take over a GiB), one run each.
BIG = [
    ("survivors 64 GiB", "survivors --size 512 --total 65536", "cpython"),
    ("survivors 64 GiB", "survivors --size 512 --total 65536", "glibc"),
    ("churn 64 GiB", "churn --live 10000000 --steps 2000000", "glibc"),
]

# The survivors study's grid (4 sizes x 7 fractions x 2 seeds, 56 points
# of 256 MiB), one layout per point, run with --jobs 1 and --jobs 2.
GRID = ["sweep", "survivors", "--vary", "size=64,128,256,512", "--vary",
        "fraction=1e-5,3e-5,1e-4,3e-4,1e-3,3e-3,1e-2", "--seeds", "2",
        "--layouts", "1", "--quiet"]

# The real allocator each model stands for (allocsim oracle --allocator).
REAL = {"glibc": "glibc", "jemalloc": "jemalloc", "mimalloc": "mimalloc",
        "tcmalloc": "tcmalloc", "musl": "musl"}


def quick_line(line):
    return re.sub(r"--steps (\d+)", lambda m: "--steps %d" % (int(m.group(1)) // 20),
                  line).replace("--total 256", "--total 32").replace(
                      "spike", "spike --count 20000", 1)


def spawn(rusage, cmd, out_path, err_path, perf_ok=False):
    """Runs cmd under tests/bench/bench_rusage (stdout, stderr to files);
    returns (exit code, cpu_s, maxrss_bytes, sys_s): cpu_s is user +
    system time, sys_s the system part of it."""
    usage = out_path + ".rusage"
    full = [rusage, usage] + cmd
    if perf_ok:
        full = ["perf", "stat", "-x", ",", "-e", "instructions:u", "--"] + full
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        code = subprocess.run(full, stdout=out, stderr=err).returncode
    try:
        cpu, sys_s, maxrss, code = open(usage).read().split()
    except (OSError, ValueError):
        return code or 1, None, None, None
    os.unlink(usage)
    return int(code), float(cpu), int(maxrss), float(sys_s)


def perf_available():
    if shutil.which("perf") is None:
        return False
    try:
        p = subprocess.run(["perf", "stat", "-x", ",", "-e", "instructions:u", "true"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and re.search(r"^\d+,", p.stderr, re.M) is not None


def instructions(perf_err):
    m = re.search(r"^(\d+),[^,]*,instructions", perf_err, re.M)
    return int(m.group(1)) if m else None


def machine_info(allocsim, perf_ok):
    def first(path, key):
        try:
            for line in open(path):
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return None
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    libc = " ".join(platform.libc_ver())
    return {
        "cpu": first("/proc/cpuinfo", "model name"),
        "cpus": os.cpu_count(),
        "memory_bytes": int(first("/proc/meminfo", "MemTotal").split()[0]) * 1024,
        "kernel": platform.release(),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "libc": libc,
        "allocsim_commit": commit,
        "loadavg_at_start": open("/proc/loadavg").read().split()[0],
        "perf_instructions": perf_ok,
        "time_measure": "CPU time (user + system) of the process; real: the "
                        "replayer's CPU time in the calls",
    }


def models(allocsim):
    out = subprocess.run([allocsim, "models"], capture_output=True, text=True,
                         check=True).stdout
    return [l.strip() for l in out.splitlines() if l and not l[0].isspace()]


def make_traces(allocsim, tdir, quick):
    os.makedirs(tdir, exist_ok=True)
    made = []
    for name, line, what in TRACES:
        if quick:
            line = quick_line(line)
        path = os.path.join(tdir, "%s%s.astrace" % (name, "-quick" if quick else ""))
        stamp = path + ".workload"
        if not (os.path.exists(path) and os.path.exists(stamp)
                and open(stamp).read() == line):
            subprocess.run([allocsim, "convert", "--workload", line, path],
                           check=True, capture_output=True)
            with open(stamp, "w") as f:
                f.write(line)
        made.append({"trace": name, "workload": line, "what": what, "path": path,
                     "bytes": os.path.getsize(path)})
    return made


def sim_once(tools, trace, model, perf_ok, tmp):
    cmd = [tools["allocsim"], "replay", trace["path"], "--model", model,
           "--layouts", "1", "--json"]
    out_p, err_p = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    code, cpu, maxrss, sys_s = spawn(tools["rusage"], cmd, out_p, err_p,
                                     perf_ok)
    err = open(err_p, errors="replace").read()
    if code != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else
                "exit %d" % code}
    d = json.load(open(out_p))
    return {"events": d["events"], "cpu_s": cpu, "sys_s": sys_s,
            "maxrss": maxrss,
            "peak": d["peak_rss_bytes"],
            "instructions": instructions(err) if perf_ok else None}


def real_once(tools, trace, allocator, tmp):
    cmd = [tools["allocsim"], "oracle", trace["path"], "--allocator", allocator,
           "--sample-every", "0", "--json"]
    out_p, err_p = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    code = spawn(tools["rusage"], cmd, out_p, err_p)[0]
    if code != 0:
        err = open(err_p, errors="replace").read().strip()
        return {"error": err.splitlines()[-1] if err else "exit %d" % code}
    d = json.load(open(out_p))
    return {"events": d["events"], "calls_cpu_ns": d["calls_cpu_ns"],
            "peak": d["peak_rss_bytes"]}


def big_once(tools, name, line, model, tmp):
    cmd = [tools["allocsim"], "run"] + line.split() + ["--model", model,
                                                      "--layouts", "1", "--json"]
    out_p, err_p = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    code, cpu, maxrss, _ = spawn(tools["rusage"], cmd, out_p, err_p)
    case = {"heap": name, "workload": line, "model": model}
    if code != 0:
        err = open(err_p, errors="replace").read().strip()
        case["error"] = err.splitlines()[-1] if err else "exit %d" % code
        return case
    d = json.load(open(out_p))
    case.update({"events": d["events"], "cpu_s": cpu,
                 "events_per_s": d["events"] / cpu if cpu else None,
                 "sim_max_rss_bytes": maxrss,
                 "simulated_peak_rss_bytes": d["peak_rss_bytes"],
                 "sim_rss_of_simulated_peak": maxrss / d["peak_rss_bytes"]})
    return case


def grid_once(tools, jobs, tmp):
    """Wall and CPU time of the grid with --jobs jobs."""
    t0 = time.monotonic()
    code, cpu, _, _ = spawn(tools["rusage"], [tools["allocsim"]] + GRID +
                         ["--jobs", str(jobs)], os.path.join(tmp, "out"),
                         os.path.join(tmp, "err"))
    wall = time.monotonic() - t0
    return {"wall_s": wall, "cpu_s": cpu} if code == 0 else None


def run_grid(args, tools, tmp):
    """The grid's medians over --runs interleaved rounds of --jobs 1 and 2."""
    runs = {1: [], 2: []}
    for _ in range(args.runs):
        for jobs in (1, 2):
            r = grid_once(tools, jobs, tmp)
            if r:
                runs[jobs].append(r)
            log(args, "grid --jobs %d: %s" % (jobs, r))
    if not runs[1] or not runs[2]:
        return None
    g = {"command": "allocsim " + " ".join(GRID), "points": 56}
    for jobs in (1, 2):
        g["jobs%d_wall_s" % jobs] = median([r["wall_s"] for r in runs[jobs]])
        g["jobs%d_cpu_s" % jobs] = median([r["cpu_s"] for r in runs[jobs]])
    g["jobs2_speedup"] = g["jobs1_wall_s"] / g["jobs2_wall_s"]
    return g


def run_decode(tools):
    """tests/bench/bench_trace_decode's figures (best of 5, CPU time): the
    default binary version (3) by blocks, as replay reads it, and one event
    at a time; version 2 for comparison."""
    exe = os.path.join(os.path.dirname(tools["rusage"]), "bench_trace_decode")
    out = subprocess.run([exe], capture_output=True, text=True).stdout

    def figures(tag):
        size = re.search(r"^%s: wrote \d+ events, \d+ bytes \(([0-9.]+) "
                         r"bytes/event\)" % tag, out, re.M)
        rates = {}
        for how in ("in batches", "one at a time"):
            m = re.search(r"^%s: decoded (\d+) events %s .*?: ([0-9.]+) M "
                          r"events/s, ([0-9.]+) ns/event" % (tag, how), out,
                          re.M)
            if m:
                rates[how] = (int(m.group(1)), float(m.group(2)) * 1e6,
                              float(m.group(3)))
        return size, rates

    size, rates = figures("binary")
    if not size or "in batches" not in rates:
        return None
    events, per_s, ns = rates["in batches"]
    d = {"events": events, "events_per_s": per_s, "ns_per_event": ns,
         "bytes_per_event": float(size.group(1))}
    if "one at a time" in rates:
        d["single_ns_per_event"] = rates["one at a time"][2]
    size2, rates2 = figures("binary v2")
    if size2 and "one at a time" in rates2:
        d["v2_bytes_per_event"] = float(size2.group(1))
        d["v2_ns_per_event"] = rates2["one at a time"][2]
    floor = re.search(r"interface: .*?: ([0-9.]+) ns/event", out)
    if floor:
        d["interface_ns_per_event"] = float(floor.group(1))
    return d


def tools_of(args):
    allocsim = os.path.abspath(args.allocsim)
    return {"allocsim": allocsim, "rusage": os.path.join(
        os.path.dirname(os.path.dirname(allocsim)), "tests", "bench_rusage")}


def run_big(args):
    tools, tmp = tools_of(args), os.path.join(args.dir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    big = []
    for name, line, model in BIG:
        big.append(big_once(tools, name, line, model, tmp))
        log(args, "big %s %s: %s" % (name, model, big[-1]))
    return big


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def real_runs(args):
    """Rounds that also time the real allocators (--real-runs, at most
    --runs): their replays write every byte and can take minutes (musl on
    churn: 3.5 min of CPU here, mostly the kernel), and they time the
    allocator, not allocsim."""
    return min(args.runs, args.real_runs if args.real_runs else args.runs)


def bench(args):
    tools = tools_of(args)
    allocsim = tools["allocsim"]
    perf_ok = perf_available()
    machine = machine_info(allocsim, perf_ok)  # the commit and load at the start
    tmp = os.path.join(args.dir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    traces = make_traces(allocsim, args.dir, args.quick)
    names = models(allocsim)
    sims = {(t["trace"], m): [] for t in traces for m in names}
    reals = {}
    for r in range(args.runs):
        for t in traces:
            for m in names:
                sims[(t["trace"], m)].append(sim_once(tools, t, m, perf_ok, tmp))
                log(args, "run %d %s %s: %s" % (r + 1, t["trace"], m,
                                                sims[(t["trace"], m)][-1]))
            for a in sorted({REAL[m] for m in names if m in REAL}
                            if r < real_runs(args) else ()):
                reals.setdefault((t["trace"], a), []).append(
                    real_once(tools, t, a, tmp))
                log(args, "run %d %s real %s: %s" % (r + 1, t["trace"], a,
                                                     reals[(t["trace"], a)][-1]))
    cases = []
    for t in traces:
        for m in names:
            ok = [s for s in sims[(t["trace"], m)] if "error" not in s]
            case = {"trace": t["trace"], "model": m}
            if not ok:
                case["error"] = sims[(t["trace"], m)][0]["error"]
                cases.append(case)
                continue
            events = ok[0]["events"]
            cpu = median([s["cpu_s"] for s in ok])
            sys_s = median([s["sys_s"] for s in ok])
            ins = median([s["instructions"] for s in ok])
            peak = ok[0]["peak"]
            maxrss = median([s["maxrss"] for s in ok])
            real = [x for x in reals.get((t["trace"], REAL.get(m)), [])
                    if "error" not in x]
            real_ns = median([x["calls_cpu_ns"] / x["events"] for x in real])
            case.update({
                "events": events,
                "events_per_s": events / cpu if cpu else None,
                "ns_per_event": cpu * 1e9 / events,
                "sys_ns_per_event": sys_s * 1e9 / events,
                "instructions_per_event": ins / events if ins else None,
                "sim_max_rss_bytes": maxrss,
                "simulated_peak_rss_bytes": peak,
                "sim_rss_of_simulated_peak": maxrss / peak if peak else None,
                "real_allocator": REAL.get(m),
                "real_ns_per_event": real_ns,
                "real_peak_rss_bytes": median([x["peak"] for x in real]),
                "speedup_over_real": real_ns / (cpu * 1e9 / events)
                if real_ns else None,
                "runs": len(ok),
                "cpu_s_runs": [round(s["cpu_s"], 4) for s in ok],
                "sys_s_runs": [round(s["sys_s"], 4) for s in ok],
            })
            cases.append(case)
    floor = spawn(tools["rusage"], ["true"], os.path.join(tmp, "out"),
                  os.path.join(tmp, "err"))[2]
    machine["rss_floor_bytes"] = floor
    big = run_big(args) if args.big else []
    return {"machine": machine, "big_heaps": big,
            "grid": run_grid(args, tools, tmp), "decode": run_decode(tools),
            "runs": args.runs, "real_runs": real_runs(args),
            "command": "scripts/bench.sh --runs %d%s%s%s" % (
                args.runs,
                " --real-runs %d" % real_runs(args)
                if real_runs(args) != args.runs else "",
                " --quick" if args.quick else "",
                " --big" if args.big else ""),
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "traces": [{k: t[k] for k in ("trace", "workload", "what", "bytes")}
                       for t in traces],
            "cases": cases}


def log(args, msg):
    if args.verbose:
        print(msg, file=sys.stderr, flush=True)


def fmt(v, spec, none="n/a"):
    return none if v is None else format(v, spec)


def mib(b):
    return b / 1048576.0


def markdown(d):
    m = d["machine"]
    out = ["# Benchmarks", "",
           "Generated by `scripts/bench.sh --doc docs/benchmarks.md` from "
           "`docs/benchmarks.json` (the same run: `scripts/bench.sh --from "
           "docs/benchmarks.json --doc docs/benchmarks.md` rewrites this page "
           "from it). Do not edit by hand; every figure here comes from that run.",
           "",
           "Run %s UTC, `%s`, commit %s, on %s (%s CPUs, %.0f GiB, kernel %s, "
           "%s, load average %s at the start)." % (
               d["date_utc"], d["command"], m["allocsim_commit"], m["cpu"],
               m["cpus"], m["memory_bytes"] / 2**30, m["kernel"], m["libc"],
               m["loadavg_at_start"]),
           "",
           "## How it measures", "",
           "- **Traces** are generated deterministically (`allocsim convert "
           "--workload LINE`) and replayed from the binary file, so decoding "
           "is part of every figure. Each replay simulates one address layout "
           "(`--layouts 1`); `replay` without the option simulates every "
           "layout that can differ (4 with 4 KiB pages) and takes that many "
           "times as long.",
           "- **Time** is the replay process's CPU time (user + system) per "
           "trace event, the median of the runs (interleaved: every model and "
           "allocator once per round). CPU time, not wall time: the machine is "
           "shared, and CPU time moves least when other work runs beside it. "
           "**Of it system** is the kernel's share (ns/event, the median of "
           "the runs' system time): the simulator's tables that grow past 64 MiB "
           "and ask for huge pages (sim/reserve.c), and how long the kernel "
           "takes to find and zero a free 2 MiB block varies from run to run.",
           "- **Instructions/event** come from `perf stat -e instructions:u` "
           "where the machine has the counter (%s)." %
           ("available here" if m["perf_instructions"] else "not on this "
            "machine: n/a below; `valgrind --tool=callgrind` gives the "
            "repeatable instruction counts then"),
           "- **Simulator RSS** is the replay process's peak RSS "
           "(`ru_maxrss`); the **simulated peak** is the model's predicted "
           "peak RSS; their ratio is the simulator's memory per byte it "
           "simulates (target: at most 10 %).",
           "- **Real** is the same trace's calls run natively on the real "
           "allocator by `allocsim oracle --sample-every 0` "
           "(traces/oracle/replayer.c): the replayer's CPU time from the "
           "first call to the last, less its reading of ops and of RSS, per "
           "trace event (the median of %s). It writes "
           "every allocated byte as the program "
           "would, so it pays for the memory traffic and page faults the "
           "simulation only counts. Models with no native replayer "
           "(`ideal`, `pymalloc`, `cpython`: pymalloc lives inside CPython) "
           "show n/a. **Speed-up** is real ns/event over simulated ns/event "
           "(target: at least 2)." % (
               "the rounds" if d.get("real_runs") in (None, d.get("runs"))
               else "the first round" if d["real_runs"] == 1
               else "the first %d rounds" % d["real_runs"]),
           "", "## Traces", "",
           "| trace | workload | what | file | bytes/event |",
           "|---|---|---|---|---:|"]
    for t in d["traces"]:
        per = bytes_per_event(d, t)
        out.append("| %s | `%s` | %s | %.1f MiB | %s |" % (
            t["trace"], t["workload"], t["what"], mib(t["bytes"]),
            "%.2f" % per if per else "n/a"))
    out += ["", "## Results", "",
            "| trace | model | events | M events/s | ns/event | of it system | "
            "instr/event | simulator RSS MiB | simulated peak MiB | ratio | "
            "real ns/event | speed-up |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in d["cases"]:
        if "error" in c:
            continue
        out.append("| %s | %s | %d | %.2f | %.1f | %s | %s | %.1f | %.1f | %s | %s | %s |" % (
            c["trace"], c["model"], c["events"], c["events_per_s"] / 1e6,
            c["ns_per_event"], fmt(c.get("sys_ns_per_event"), ".1f"),
            fmt(c["instructions_per_event"], ".0f"),
            mib(c["sim_max_rss_bytes"]), mib(c["simulated_peak_rss_bytes"]),
            fmt(c["sim_rss_of_simulated_peak"] and
                100 * c["sim_rss_of_simulated_peak"], ".1f") +
            ("" if c["sim_rss_of_simulated_peak"] is None else " %"),
            fmt(c["real_ns_per_event"], ".1f"),
            fmt(c["speedup_over_real"], ".2f") +
            ("" if c["speedup_over_real"] is None else "x")))
    failed = [c for c in d["cases"] if "error" in c]
    if failed:
        out += ["", "Not in the table (the replay refuses the trace):", ""]
        out += ["- %s on %s: %s" % (c["model"], c["trace"], c["error"])
                for c in failed]
    if d.get("big_heaps"):
        out += ["", "## Heaps larger than the machine", "",
                "`scripts/bench.sh --big`: generated and replayed in one "
                "stream (`allocsim run`), one run each.", "",
                "| heap | workload | model | events | M events/s | "
                "simulator RSS MiB | simulated peak GiB | ratio |",
                "|---|---|---|---:|---:|---:|---:|---:|"]
        for c in d["big_heaps"]:
            if "error" in c:
                out.append("| %s | `%s` | %s | fails: %s |||||" % (
                    c["heap"], c["workload"], c["model"], c["error"]))
                continue
            out.append("| %s | `%s` | %s | %d | %.2f | %.0f | %.1f | %.1f %% |" % (
                c["heap"], c["workload"], c["model"], c["events"],
                c["events_per_s"] / 1e6, mib(c["sim_max_rss_bytes"]),
                c["simulated_peak_rss_bytes"] / 2**30,
                100 * c["sim_rss_of_simulated_peak"]))
    out += grid_and_decode(d)
    out += ["", "## Against the targets", ""]
    out += targets(d)
    return "\n".join(out) + "\n"


def bytes_per_event(d, t):
    """The trace file's bytes per event (events from any case that read
    it), or None."""
    events = [c["events"] for c in d["cases"]
              if c.get("trace") == t["trace"] and c.get("events")]
    return t["bytes"] / events[0] if events else None


def grid_and_decode(d):
    out = []
    g = d.get("grid")
    if g:
        out += ["", "## The survivors grid", "",
                "`%s`, with `--jobs 1` and `--jobs 2`: %d points; medians of "
                "the rounds, wall time (the target is a wall time) and CPU "
                "time." % (g["command"], g["points"]), "",
                "| jobs | wall s | CPU s |", "|---:|---:|---:|",
                "| 1 | %.2f | %.2f |" % (g["jobs1_wall_s"], g["jobs1_cpu_s"]),
                "| 2 | %.2f | %.2f |" % (g["jobs2_wall_s"], g["jobs2_cpu_s"])]
    c = d.get("decode")
    if c:
        out += ["", "## Decoding", "",
                "`tests/bench_trace_decode` (tests/bench/bench_trace_decode.c)"
                ": %d events of a malloc/free mix written to a binary trace "
                "(version 3, %.2f bytes/event) and read back by blocks, as "
                "replay reads it, best of 5 by CPU time: %.1f M events/s, "
                "%.2f ns/event." % (
                    c["events"], c["bytes_per_event"], c["events_per_s"] / 1e6,
                    c["ns_per_event"])]
        if "single_ns_per_event" in c:
            out += ["", "The same file one event at a time (`next()`, an "
                    "indirect call and a copy per event): %.2f ns/event." %
                    c["single_ns_per_event"]]
        if "v2_ns_per_event" in c:
            out += ["", "Version 2 (record after record, varints; `convert "
                    "--format binary-v2`) of the same events: %.2f "
                    "bytes/event, %.2f ns/event." % (
                        c["v2_bytes_per_event"], c["v2_ns_per_event"])]
        if "interface_ns_per_event" in c:
            out += ["", "A source that decodes nothing, one event at a time "
                    "(each `next()` only fills the event): %.2f ns/event, "
                    "the floor of the per-event interface that the batches "
                    "avoid." % c["interface_ns_per_event"]]
    return out


def grid_and_decode_targets(d):
    lines = []
    g = d.get("grid")
    if g:
        lines.append("- The 56-point survivors grid in at most 2 s wall with "
                     "--jobs 2: %.2f s (%s); --jobs 2 at least 1.8x faster "
                     "than --jobs 1: %.2fx (%s)." % (
                         g["jobs2_wall_s"],
                         "met" if g["jobs2_wall_s"] <= 2 else "missed",
                         g["jobs2_speedup"],
                         "met" if g["jobs2_speedup"] >= 1.8 else "missed"))
    c = d.get("decode")
    if c:
        lines.append("- Decoding at least 250 M events/s: %.1f M (%s)." % (
            c["events_per_s"] / 1e6,
            "met" if c["events_per_s"] >= 250e6 else "missed"))
    sizes = [(t["trace"], bytes_per_event(d, t)) for t in d.get("traces", [])
             if t["trace"] in ("survivors", "churn")]
    if sizes and all(s for _, s in sizes):
        lines.append("- Trace files at most 5 bytes/event on survivors and "
                     "churn: %s." % ", ".join(
                         "%s %.2f (%s)" % (n, s, "met" if s <= 5 else "missed")
                         for n, s in sizes))
    return lines


def targets(d):
    lines = []
    ok = [c for c in d["cases"] if "error" not in c]
    mem = [c for c in ok if c["sim_rss_of_simulated_peak"] is not None
           and c["simulated_peak_rss_bytes"] >= 64 << 20]
    over = [c for c in mem if c["sim_rss_of_simulated_peak"] > 0.10]
    lines.append("- Simulator RSS at most 10 %% of the simulated peak (cases "
                 "whose peak is at least 64 MiB): %d of %d met%s." % (
                     len(mem) - len(over), len(mem),
                     "" if not over else "; missed by " + ", ".join(
                         "%s/%s (%.1f %%)" % (c["trace"], c["model"],
                                              100 * c["sim_rss_of_simulated_peak"])
                         for c in over)))
    big = [c for c in d.get("big_heaps", []) if "error" not in c]
    if big:
        lines.append("- 64 GiB heaps completed on this %.0f GiB machine: %s." % (
            d["machine"]["memory_bytes"] / 2**30, "; ".join(
                "%s with %s, simulator RSS %.0f MiB = %.1f %% of %.1f GiB (%s)" % (
                    c["heap"], c["model"], mib(c["sim_max_rss_bytes"]),
                    100 * c["sim_rss_of_simulated_peak"],
                    c["simulated_peak_rss_bytes"] / 2**30,
                    "met" if c["sim_rss_of_simulated_peak"] <= 0.10 else "missed")
                for c in big)))
    fast = [c for c in ok if c["speedup_over_real"] is not None]
    slow = [c for c in fast if c["speedup_over_real"] < 2]
    lines.append("- At least 2x faster than the real allocator: %d of %d met%s." % (
        len(fast) - len(slow), len(fast),
        "" if not slow else "; missed by " + ", ".join(
            "%s/%s (%.2fx)" % (c["trace"], c["model"], c["speedup_over_real"])
            for c in slow)))
    goals = {"ideal": 100e6, "cpython": 60e6}
    rate = []
    for c in ok:
        goal = goals.get(c["model"], 25e6 if c["model"] in REAL else None)
        if goal is None or (c["model"] in REAL and c["trace"] not in
                            ("churn", "survivors")):
            continue
        if c["model"] == "cpython" and c["trace"] != "survivors":
            continue
        rate.append("%s/%s %.1f M/s of %.0f M (%s)" % (
            c["trace"], c["model"], c["events_per_s"] / 1e6, goal / 1e6,
            "met" if c["events_per_s"] >= goal else "missed"))
    lines.append("- Replay rates against the issue's goals (ideal 100 M/s; "
                 "cpython 60 M/s on survivors; allocator models 25 M/s on "
                 "churn and survivors): " + "; ".join(rate) + ".")
    return lines + grid_and_decode_targets(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the JSON")
    ap.add_argument("--runs", type=int, default=3, help="interleaved rounds (3)")
    ap.add_argument("--real-runs", type=int, default=0,
                    help="rounds that also time the real allocators "
                    "(default: every round)")
    ap.add_argument("--quick", action="store_true",
                    help="small traces (a smoke test, not figures)")
    ap.add_argument("--dir", default=os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "allocsim-bench-%d" % os.getuid()),
        help="where the generated traces are kept between runs")
    ap.add_argument("--allocsim", default=os.path.join(ROOT, "build/cli/allocsim"))
    ap.add_argument("--big", action="store_true",
                    help="also simulate the 64 GiB heaps (minutes, GiBs)")
    ap.add_argument("--doc", help="write the markdown page here")
    ap.add_argument("--from", dest="from_json",
                    help="no run: read this JSON (with --doc: rewrite the "
                    "page; with --big: add the big heaps to it)")
    ap.add_argument("--save", help="also write the JSON here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs expects at least 1")
    if args.from_json:
        d = json.load(open(args.from_json))
        if args.big:  # add the big heaps to a saved run
            d["big_heaps"] = run_big(args)
            d["command"] += " --big"
    else:
        if not os.access(args.allocsim, os.X_OK):
            print("bench.sh: %s not found: build first (scripts/build.sh)" %
                  args.allocsim, file=sys.stderr)
            return 1
        d = bench(args)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(d, f, indent=1)
            f.write("\n")
    if args.doc:
        with open(args.doc, "w") as f:
            f.write(markdown(d))
    if args.json:
        json.dump(d, sys.stdout, indent=1)
        print()
    elif not args.doc:
        print(markdown(d), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
