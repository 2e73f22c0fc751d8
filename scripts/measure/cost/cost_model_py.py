#!/usr/bin/env python3
"""scripts/measure/cost/cost_model_py.py -- what one object allocation and
one free cost in a CPython program, as the synthetic CPython workloads
(survivors, spike, webworker) emit them: a bytes object created and kept in
a list, then the list dropped.  Prints "python_alloc_ns V" and
"python_free_ns V", medians of 9 repetitions, for cost_model.sh."""
import statistics
import time

N = 200_000
REPS = 9


def once(size):
    t0 = time.perf_counter_ns()
    objs = [bytes(size) for _ in range(N)]
    t1 = time.perf_counter_ns()
    del objs
    t2 = time.perf_counter_ns()
    return (t1 - t0) / N, (t2 - t1) / N


def main():
    runs = [once(64) for _ in range(REPS)]
    print("python_alloc_ns %.1f" % statistics.median(r[0] for r in runs))
    print("python_free_ns %.1f" % statistics.median(r[1] for r in runs))


if __name__ == "__main__":
    main()
