#!/usr/bin/env python3
"""scripts/measure/advise_threads.py -- what `allocsim advise` predicts for a
threaded C++ program against the program run under each remedy.

    advise_threads.py ALLOCSIM --work DIR [--runs 3]

Builds scripts/measure/capture_programs/cxx_threads_maps.cpp (g++ -O2),
captures it --runs times with the default glibc, runs `allocsim advise` at
the mark 'cleared' on the first capture, then captures it --runs times
under each remedy that is an environment setting (an allocator preloaded
from Debian's packages, MALLOC_ARENA_MAX) and prints a Markdown table: the
predicted saving at 'cleared' against the measured one (the default runs'
median RSS there minus each remedy run's), the min-max over the runs.
Python 3 standard library only.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "capture_programs", "cxx_threads_maps.cpp")
LIBDIR = "/usr/lib/x86_64-linux-gnu"
MIB = 1 << 20


def build(work):
    exe = os.path.join(work, "cxx_threads_maps")
    subprocess.run(["g++", "-O2", "-pthread", "-o", exe, SOURCE], check=True)
    return exe


def capture(allocsim, work, exe, env, name):
    """RSS at 'cleared' of one capture under env, and its trace."""
    trace = os.path.join(work, name + ".astrace")
    db = os.path.join(work, name + ".db")
    if os.path.exists(db):
        os.remove(db)
    subprocess.run([allocsim, "capture", "-o", trace, "--db", db, "--", exe],
                   env=dict(os.environ, **env), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with sqlite3.connect(db) as c:
        (rss,) = c.execute("SELECT measured_rss_bytes FROM samples WHERE "
                           "kind = 'mark' AND label = 'cleared'").fetchone()
    return rss, trace


def remedy_env(setting):
    """{VAR: value} of an advise remedy's setting, or None for a call."""
    env = {}
    for word in setting.split():
        if "=" not in word:
            return None
        k, v = word.split("=", 1)
        if k == "LD_PRELOAD":
            v = os.path.join(LIBDIR, v)
            if not os.path.exists(v):
                return None
        env[k] = v
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("allocsim")
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    allocsim = os.path.abspath(a.allocsim)
    exe = build(a.work)
    base = [capture(allocsim, a.work, exe, {}, "default-%d" % i)
            for i in range(a.runs)]
    advice = json.loads(subprocess.run(
        [allocsim, "advise", base[0][1], "--at", "cleared", "--json"],
        check=True, capture_output=True, text=True).stdout)
    base_rss = statistics.median(r for r, _ in base)
    print("| remedy | predicted saving MiB | measured saving MiB (%d runs) |"
          % a.runs)
    print("|---|---:|---:|")
    print("| (the default runs: RSS at 'cleared') | | %.1f (%.1f-%.1f) |" % (
        base_rss / MIB, min(r for r, _ in base) / MIB,
        max(r for r, _ in base) / MIB))
    for r in advice["remedies"]:
        env = remedy_env(r["env_or_call"])
        if not r["ok"] or env is None:
            continue
        got = [base_rss - capture(allocsim, a.work, exe, env, "remedy")[0]
               for _ in range(a.runs)]
        print("| %s | %.1f | %.1f to %.1f |" % (
            r["name"], r["saving_bytes_at_mark"] / MIB, min(got) / MIB,
            max(got) / MIB), flush=True)


if __name__ == "__main__":
    sys.exit(main())
