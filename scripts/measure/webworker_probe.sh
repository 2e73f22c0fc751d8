#!/bin/sh
# scripts/measure/webworker_probe.sh -- one run of the webworker program
# (scripts/measure/webworker.py, full size) under a chosen CPython, glibc
# and arena limit, written as data/measured/webworker-probe-*.trace
# (docs/webworker.md, "The study's software on this machine").
#
#   scripts/measure/webworker_probe.sh PYTHON GLIBC_ROOT THREADS ARENA_MAX RUN
#
# PYTHON      the interpreter (its version names the file)
# GLIBC_ROOT  "system", or the root of an unpacked libc6 package (as
#             scripts/measure/glibc_differential.sh unpacks Debian 13's
#             2.41): the run goes through that root's loader and libraries,
#             with PYTHON's own lib directory (a shared libpython) after them
# THREADS     worker threads
# ARENA_MAX   MALLOC_ARENA_MAX, or "default" (8 arenas a CPU)
# RUN         repeat number, for the file name
#
# The trace records the glibc the program ran on (glibc, glibc_version),
# so `allocsim compare` replays it with that version of the model.
set -eu

if [ $# -ne 5 ]; then
  echo "usage: webworker_probe.sh PYTHON GLIBC_ROOT THREADS ARENA_MAX RUN" >&2
  exit 2
fi
python=$1 root=$2 threads=$3 arenas=$4 run=$5
number() { # NAME VALUE: a positive integer, else a one-line error
  case $2 in
    '' | *[!0-9]* | 0*) echo "webworker_probe.sh: $1: expected a positive" \
      "integer, got '$2'" >&2; exit 2 ;;
  esac
}
number THREADS "$threads"
number RUN "$run"
[ "$arenas" = default ] || number ARENA_MAX "$arenas"
here=$(cd "$(dirname "$0")/../.." && pwd)

pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
set -- "$python"
if [ "$root" != system ]; then
  lib=$root/usr/lib/x86_64-linux-gnu
  [ -x "$lib/ld-linux-x86-64.so.2" ] || {
    echo "webworker_probe.sh: $lib/ld-linux-x86-64.so.2: no loader there" >&2
    exit 1
  }
  pylib=$(cd "$(dirname "$python")/../lib" 2>/dev/null && pwd || echo "")
  set -- "$lib/ld-linux-x86-64.so.2" --library-path "$lib${pylib:+:$pylib}" \
    "$python"
fi
glibc=$("$@" -c 'import platform; print(platform.libc_ver()[1])')
out=data/measured/webworker-probe-py$pyver-glibc$glibc-t$threads
if [ "$arenas" = default ]; then
  unset MALLOC_ARENA_MAX
  out=$out-r$run.trace
else
  export MALLOC_ARENA_MAX=$arenas
  out=$out-am$arenas-r$run.trace
fi
cd "$here"
nice "$@" scripts/measure/webworker.py --threads "$threads" --out "$out"
echo "wrote $out" >&2
