#!/bin/sh
# scripts/measure/run_webworker_ft.sh -- the webworker study's program
# (webworker.py) on a free-threaded interpreter you supply (python3.14t;
# Debian 12 packages none), at 1, 16 and 64 worker threads, with mimalloc's
# default purge delay and with MIMALLOC_PURGE_DELAY=0.  webworker.py records
# build=ft and the MIMALLOC_* settings, so `allocsim record` and `compare`
# replay each run on cpython:build=ft (docs/models/cpython-ft.md).
# Usage: scripts/measure/run_webworker_ft.sh PYTHON [OUTDIR [REPEATS]]
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 PYTHON [OUTDIR [REPEATS]]  (PYTHON: a free-threaded python3.14t)" >&2
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
k=1
while [ "$k" -le "$repeats" ]; do
  for threads in 1 16 64; do
    for delay in default purge0; do
      envs=
      [ "$delay" = purge0 ] && envs=MIMALLOC_PURGE_DELAY=0
      echo "== threads $threads, $delay ($ver)"
      # shellcheck disable=SC2086
      $clean $envs nice "$py" "$here/webworker.py" --threads "$threads" \
        --out "$out/webworker-ft$ver-threads$threads-$delay-r$k.trace"
    done
  done
  k=$((k + 1))
done
