#!/bin/sh
# scripts/measure/jemalloc/run.sh -- measures jemalloc 5.3.0 (Debian 12's
# libjemalloc2, through LD_PRELOAD) on this machine and writes measured-run
# files into OUTDIR (default data/measured).
#
# Usage: scripts/measure/jemalloc/run.sh SET [OUTDIR [REPEATS [PYTHON]]]
#   SET decay      je_decay after idle / tiny / busy at dirty_decay_ms
#                  0, 1000, 10000, -1 (one run each):
#                  je-decay-<after>-d<ms>.trace
#   SET bg         the same with background_thread:true at dirty_decay_ms
#                  1000 and 10000, REPEATS runs each (default 5), since the
#                  purge time depends on where the background thread's sleep
#                  happens to be: je-decay-<after>-bg<ms>-r<k>.trace
#   SET churn      je_churn at the defaults and with background_thread:true:
#                  je-churn[-bg]-r<k>.trace (REPEATS runs)
#   SET spike      scripts/measure/spike.py at 1 and 16 threads under
#                  jemalloc: spike-jemalloc[-threads16]-r<k>.trace
#   SET webworker  scripts/measure/webworker.py at 1, 16 and 64 threads
#                  under jemalloc, and at 64 with background_thread:true:
#                  webworker-jemalloc[-bg]-t<T>-r<k>.trace
#   SET lab        je_lab_decay (the course notes' decay trade-off lab) at
#                  dirty_decay_ms 0, 1000, 10000, -1, REPEATS runs each:
#                  je-lab-decay-d<ms>-r<k>.trace
#   SET all        all of the above
# Binaries go to a temporary directory and are never committed.  Everything
# runs under nice: the machine is shared.  Runs are sequential, so the
# timing-sensitive ones (background threads, busy loops) see no competition
# from this script itself.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
set_=${1:?usage: run.sh SET [OUTDIR [REPEATS [PYTHON]]]}
out=${2:-$root/data/measured}
repeats=${3:-5}
py=${4:-/usr/bin/python3.11}
lib=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -r "$lib" ] || { echo "run.sh: $lib missing (apt-get install libjemalloc2)" >&2; exit 1; }
mkdir -p "$out"
bin=$(mktemp -d "${TMPDIR:-/tmp}/allocsim-je.XXXXXX")
trap 'rm -rf "$bin"' EXIT
for p in je_decay je_churn je_meta je_lab_decay; do
  cc -std=gnu17 -O2 -Wall -Wextra -Werror -pthread -o "$bin/$p" \
     "$here/$p.c" -ldl -lm
done
# env -u makes "unset" explicit even if the caller exported a knob.
clean="env -u MALLOC_CONF -u MALLOC_ARENA_MAX -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u MALLOC_TOP_PAD_ -u GLIBC_TUNABLES -u LD_PRELOAD"

je() { # je CONF PROGRAM ARGS...: run under jemalloc with MALLOC_CONF=CONF
  conf=$1
  shift
  if [ -n "$conf" ]; then
    $clean LD_PRELOAD="$lib" MALLOC_CONF="$conf" nice "$@"
  else
    $clean LD_PRELOAD="$lib" nice "$@"
  fi
}

run_decay() {
  for ms in 0 1000 10000 -1; do
    for after in idle tiny busy; do
      echo "== decay $after dirty_decay_ms=$ms" >&2
      je "dirty_decay_ms:$ms" "$bin/je_decay" \
        "$out/je-decay-$after-d$ms.trace" "$after" >/dev/null
    done
  done
}

run_bg() {
  k=1
  while [ "$k" -le "$repeats" ]; do
    for ms in 1000 10000; do
      for after in idle tiny busy; do
        echo "== decay $after background_thread dirty_decay_ms=$ms r$k" >&2
        je "background_thread:true,dirty_decay_ms:$ms" "$bin/je_decay" \
          "$out/je-decay-$after-bg$ms-r$k.trace" "$after" >/dev/null
      done
    done
    k=$((k + 1))
  done
}

run_churn() {
  k=1
  while [ "$k" -le "$repeats" ]; do
    echo "== churn r$k" >&2
    je "" "$bin/je_churn" "$out/je-churn-r$k.trace" >/dev/null
    je "background_thread:true" "$bin/je_churn" "$out/je-churn-bg-r$k.trace" \
      >/dev/null
    k=$((k + 1))
  done
}

# The Python scripts record the preload and MALLOC_CONF themselves
# (env.LD_PRELOAD, env.MALLOC_CONF); this checks that they did.
tag_preload() {
  grep -q '^#@ env.LD_PRELOAD=' "$1" ||
    { echo "run.sh: $1 does not record LD_PRELOAD" >&2; exit 1; }
}

run_spike() {
  k=1
  while [ "$k" -le "$repeats" ]; do
    echo "== spike jemalloc r$k" >&2
    je "" "$py" "$root/scripts/measure/spike.py" \
      --out "$out/spike-jemalloc-r$k.trace"
    je "" "$py" "$root/scripts/measure/spike.py" --threads 16 \
      --out "$out/spike-jemalloc-threads16-r$k.trace"
    tag_preload "$out/spike-jemalloc-r$k.trace"
    tag_preload "$out/spike-jemalloc-threads16-r$k.trace"
    k=$((k + 1))
  done
}

run_webworker() {
  k=1
  while [ "$k" -le "$repeats" ]; do
    for t in 1 16 64; do
      echo "== webworker jemalloc t$t r$k" >&2
      je "" "$py" "$root/scripts/measure/webworker.py" --threads "$t" \
        --out "$out/webworker-jemalloc-t$t-r$k.trace"
      tag_preload "$out/webworker-jemalloc-t$t-r$k.trace"
    done
    echo "== webworker jemalloc background_thread t64 r$k" >&2
    je "background_thread:true" "$py" "$root/scripts/measure/webworker.py" \
      --threads 64 --out "$out/webworker-jemalloc-bg-t64-r$k.trace"
    tag_preload "$out/webworker-jemalloc-bg-t64-r$k.trace"
    k=$((k + 1))
  done
}

run_lab() {
  k=1
  while [ "$k" -le "$repeats" ]; do
    for ms in 0 1000 10000 -1; do
      echo "== lab-decay dirty_decay_ms=$ms r$k" >&2
      je "dirty_decay_ms:$ms" "$bin/je_lab_decay" \
        "$out/je-lab-decay-d$ms-r$k.trace" >/dev/null
    done
    k=$((k + 1))
  done
}

case $set_ in
  decay) run_decay ;;
  bg) run_bg ;;
  churn) run_churn ;;
  spike) run_spike ;;
  webworker) run_webworker ;;
  lab) run_lab ;;
  all) run_decay; run_bg; run_churn; run_spike; run_webworker; run_lab ;;
  *) echo "run.sh: unknown set '$set_'" >&2; exit 2 ;;
esac
