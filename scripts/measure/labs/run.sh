#!/bin/sh
# scripts/measure/labs/run.sh -- builds the C labs of the allocator course
# notes (section 20) and
# records measured-run files for every variant in data/measured/.
#
# Usage: scripts/measure/labs/run.sh [OUTDIR]   (default data/measured)
# Binaries go to a temporary directory and are never committed.  Runs under
# nice: the machine is shared.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$root/data/measured}
bin=$(mktemp -d "${TMPDIR:-/tmp}/allocsim-labs.XXXXXX")
trap 'rm -rf "$bin"' EXIT
mkdir -p "$out"
for lab in lab_brk lab_mmap_threshold lab_arenas; do
  cc -std=gnu17 -O2 -Wall -Wextra -Werror -pthread -o "$bin/$lab" \
     "$here/$lab.c"
done
# env -u makes "unset" explicit even if the caller exported a MALLOC_* knob.
clean="env -u MALLOC_ARENA_MAX -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u MALLOC_TOP_PAD_ -u MALLOC_ARENA_TEST -u GLIBC_TUNABLES"
$clean nice "$bin/lab_brk" "$out/lab-brk.trace" >/dev/null
$clean nice "$bin/lab_mmap_threshold" "$out/lab-mmap-threshold.trace" >/dev/null
$clean MALLOC_MMAP_THRESHOLD_=131072 nice "$bin/lab_mmap_threshold" \
  "$out/lab-mmap-threshold-mmap131072.trace" >/dev/null
# Lab 5's RSS moves in 64 KiB steps between identical runs, so each setting
# runs 7 times and the docs use the median.  The control (--iterations 0:
# same threads, no malloc) measures what thread stacks and TLS cost.
for k in 1 2 3 4 5 6 7; do
  $clean nice "$bin/lab_arenas" "$out/lab-arenas-control-r$k.trace" 64 0 \
    >/dev/null
  $clean nice "$bin/lab_arenas" "$out/lab-arenas-r$k.trace" >/dev/null
  $clean MALLOC_ARENA_MAX=8 nice "$bin/lab_arenas" \
    "$out/lab-arenas-arenamax8-r$k.trace" >/dev/null
  $clean MALLOC_ARENA_MAX=1 nice "$bin/lab_arenas" \
    "$out/lab-arenas-arenamax1-r$k.trace" >/dev/null
done
for f in lab-brk lab-mmap-threshold lab-mmap-threshold-mmap131072 \
         lab-arenas-r1 lab-arenas-arenamax8-r1 lab-arenas-arenamax1-r1; do
  echo "== $f"
  grep -v '^#@' "$out/$f.trace" | grep -v '^allocsim' || true
  grep '^#@ arenas=' "$out/$f.trace" || true
done
