#!/bin/sh
# scripts/measure/run_survivors_ft.sh -- the survivors study's free-threaded
# cases on this machine, with a free-threaded interpreter you supply
# (python3.13t / python3.14t; Debian 12 packages none).  survivors_ft.py does
# the work; each run is a measured-run file in OUTDIR.
#
# Cases (the study's free-threaded findings, docs/models/cpython-ft.md):
#   kept-<size>-<fraction>-<delay>   build 256 MiB of <size>-byte bytes, keep
#        <fraction> at random (seed 1), free, gc.collect(), 2.5 s of light
#        allocation (mark after), then one 256 KiB bytes object, whose
#        large-page allocation runs CPython's QSBR page collect (after_alloc);
#        delay = default | purge0 (MIMALLOC_PURGE_DELAY=0); with the page
#        layout of the objects (--layout)
#   idle-<size>-<delay>              the same with fraction 0 and a silent
#        2.5 s (no allocation at all)
#   tuples-<delay>                   fraction 0 of 64 B, then 256 MiB of
#        56-byte (sys.getsizeof) 1-tuples (another heap); tuples-fresh-<delay> the tuples alone
#   gctuple-<delay>                  256 MiB of 64-byte tuples (the GC heap),
#        freed, gc.collect() (the collector visits the GC heap's pages), then
#        the 256 KiB trigger: the pre-3.14.4 page leak (gh-145615) shows here
#   long-<delay>                     fraction 0 of 64 B, then 600 s of light
#        allocation every 50 ms, RSS every 100 ms (only with LONG=1)
# Usage: scripts/measure/run_survivors_ft.sh PYTHON [OUTDIR [REPEATS]]
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 PYTHON [OUTDIR [REPEATS]]  (PYTHON: a free-threaded python3.13t/3.14t)" >&2
  exit 2
fi
py=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${2:-$root/data/measured}
repeats=${3:-1}
mkdir -p "$out"
ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
clean="env -u MIMALLOC_PURGE_DELAY -u MIMALLOC_ARENA_PURGE_MULT -u MIMALLOC_PURGE_DECOMMITS -u PYTHONMALLOC"
run() { # name delay args...
  name=$1; delay=$2; shift 2
  envs=
  [ "$delay" = purge0 ] && envs=MIMALLOC_PURGE_DELAY=0
  echo "== $name ($ver)"
  # shellcheck disable=SC2086
  $clean $envs nice "$py" "$here/survivors_ft.py" "$@" \
    --out "$out/survivors-ft$ver-$name-r$k.trace"
}
k=1
while [ "$k" -le "$repeats" ]; do
  for delay in default purge0; do
    for size in 64 512; do
      for fraction in 0 1e-4 1e-3 1e-2; do
        run "kept-$size-$fraction-$delay" $delay --size $size --fraction $fraction --seed 1 \
          --alloc-after 262144 --layout
      done
      run "idle-$size-$delay" $delay --size $size --fraction 0 --idle
    done
    run "tuples-$delay" $delay --size 64 --fraction 0 --reuse-kind tuple \
      --reuse-size 56 --reuse-total 256
    run "tuples-fresh-$delay" $delay --size 64 --total 0.001 --fraction 0 \
      --reuse-kind tuple --reuse-size 56 --reuse-total 256
    run "gctuple-$delay" $delay --kind tuple --size 64 --fraction 0 \
      --settle-ms 500 --alloc-after 262144
    if [ "${LONG:-0}" = 1 ]; then
      run "long-$delay" $delay --size 64 --fraction 0 --settle-ms 600000
    fi
  done
  k=$((k + 1))
done
