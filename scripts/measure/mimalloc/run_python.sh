#!/bin/sh
# scripts/measure/mimalloc/run_python.sh -- the spike and webworker
# workloads (scripts/measure/spike.py, webworker.py) under a preloaded
# mimalloc, at 1 and 16 threads, default options and immediate purge.
#
# Usage: scripts/measure/mimalloc/run_python.sh LIB VERSION [OUTDIR [REPEATS [PYTHON]]]
#   LIB, VERSION as for run_c.sh.  Files: OUTDIR/{spike,webworker}-
#   mimalloc-VERSION-threadsT-PURGE-rK.trace.
# The measurement scripts record glibc's knobs only, so this wrapper adds the
# allocator's provenance after the header: env.LD_PRELOAD, every MIMALLOC_*
# setting as env.NAME, and mimalloc_version (mi_version() in the process,
# decoded as scripts/measure/mimalloc/mi_measure.h does: 209 = 2.0.9,
# 3206 = 3.2.6, 30403 = 3.4.3), and removes their libc=glibc line.
# Runs under nice: the machine is shared.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
measure=$(cd "$here/.." && pwd)
root=$(cd "$here/../../.." && pwd)
lib=$1
version=$2
out=${3:-$root/data/measured}
repeats=${4:-1}
py=${5:-/usr/bin/python3.11}
[ -f "$lib" ] || { echo "run_python.sh: $lib: no such library" >&2; exit 1; }
mkdir -p "$out"
case $version in
  2.0.*) immediate=MIMALLOC_DECOMMIT_DELAY=0 ;;
  *)     immediate=MIMALLOC_PURGE_DELAY=0 ;;
esac
clean=$(env | sed -n 's/^\(MIMALLOC_[A-Za-z_]*\|MALLOC_[A-Za-z_]*\)=.*/-u \1/p' | tr '\n' ' ')
miver=$(LD_PRELOAD="$lib" "$py" -c \
  'import ctypes; v = ctypes.CDLL(None).mi_version(); print("%d.%d.%d" % ((v // 10000, v // 100 % 100, v % 100) if v >= 10000 else (v // 1000, v // 100 % 10, v % 100) if v >= 1000 else (v // 100, v // 10 % 10, v % 10)))')

# add_provenance FILE ENVS: inserts the allocator's #@ lines after line 1
# and drops the script's libc=glibc spec, so that the run's model is picked
# from LD_PRELOAD, mimalloc_version and the MIMALLOC_* settings.
add_provenance() {
  sed -i '/^#@ libc=/d' "$1"
  {
    echo "#@ env.LD_PRELOAD=$lib"
    echo "#@ mimalloc_version=$miver"
    for e in $2; do echo "#@ env.${e%%=*}=${e#*=}"; done
  } >"$1.prov"
  sed -i "1r $1.prov" "$1"
  rm -f "$1.prov"
}

k=1
while [ "$k" -le "$repeats" ]; do
  for threads in 1 16; do
    for purge in default immediate; do
      case $purge in default) envs= ;; immediate) envs=$immediate ;; esac
      for prog in spike webworker; do
        f=$out/$prog-mimalloc-$version-threads$threads-$purge-r$k.trace
        echo "== $f" >&2
        # shellcheck disable=SC2086
        env $clean $envs LD_PRELOAD="$lib" nice "$py" "$measure/$prog.py" \
          --threads "$threads" --out "$f" >/dev/null
        add_provenance "$f" "$envs"
      done
    done
  done
  k=$((k + 1))
done
