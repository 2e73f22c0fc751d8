#!/bin/sh
# scripts/measure/run_spike.sh -- records the load-spike study's variants on
# this machine into data/measured/ (spike.py does the work).
#
# Variants (the study's table): defaults; 16 threads; 16 threads with
# MALLOC_ARENA_MAX=2; MALLOC_MMAP_THRESHOLD_=512; MALLOC_TRIM_THRESHOLD_=131072.
# Each runs REPEATS times (default 3) as spike-<variant>-r<k>.trace.
# Usage: scripts/measure/run_spike.sh [OUTDIR [REPEATS [PYTHON]]]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/data/measured}
repeats=${2:-3}
py=${3:-/usr/bin/python3.11}
mkdir -p "$out"
clean="env -u MALLOC_ARENA_MAX -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u MALLOC_TOP_PAD_ -u MALLOC_ARENA_TEST -u GLIBC_TUNABLES"
k=1
while [ "$k" -le "$repeats" ]; do
  for v in default threads16 threads16-arenamax2 mmap512 trim131072; do
    case $v in
      default)            envs= ; args= ;;
      threads16)          envs= ; args="--threads 16" ;;
      threads16-arenamax2) envs=MALLOC_ARENA_MAX=2 ; args="--threads 16" ;;
      mmap512)            envs=MALLOC_MMAP_THRESHOLD_=512 ; args= ;;
      trim131072)         envs=MALLOC_TRIM_THRESHOLD_=131072 ; args= ;;
    esac
    echo "== $v r$k"
    # shellcheck disable=SC2086
    $clean $envs nice "$py" "$here/spike.py" $args \
      --out "$out/spike-$v-r$k.trace"
  done
  # The interpreter's own footprint with the study's imports, with and without
  # the 512-byte threshold (docs/glibc-validation.md, "baseline").
  $clean nice "$py" "$here/baseline.py" --out "$out/baseline-default-r$k.trace"
  $clean MALLOC_MMAP_THRESHOLD_=512 nice "$py" "$here/baseline.py" \
    --out "$out/baseline-mmap512-r$k.trace"
  k=$((k + 1))
done
