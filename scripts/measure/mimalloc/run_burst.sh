#!/bin/sh
# scripts/measure/mimalloc/run_burst.sh -- runs burst.c on one mimalloc
# library for every size, activity and purge setting, writing measured-run
# files burst-VERSION-SIZE-ACTIVITY-PURGE.trace into OUTDIR.
#
# Usage: scripts/measure/mimalloc/run_burst.sh LIB VERSION [OUTDIR [EXTRA]]
#   LIB      the libmimalloc.so to LD_PRELOAD (Debian 12's 2.0.9 is
#            /usr/lib/x86_64-linux-gnu/libmimalloc.so.2; other versions are
#            built by hand from github.com/microsoft/mimalloc, see
#            docs/models/mimalloc.md)
#   VERSION  2.0.9, 2.1.2, ... (2.0.x spells immediate purge
#            MIMALLOC_DECOMMIT_DELAY=0, later versions MIMALLOC_PURGE_DELAY=0)
#   EXTRA    more burst.c arguments, e.g. --events
# The burst binary goes to a temporary directory.  Runs under nice.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
lib=$1
version=$2
out=${3:-$root/data/measured}
extra=${4:-}
[ -f "$lib" ] || { echo "run_burst.sh: $lib: no such library" >&2; exit 1; }
bin=$(mktemp -d "${TMPDIR:-/tmp}/allocsim-burst.XXXXXX")
trap 'rm -rf "$bin"' EXIT
mkdir -p "$out"
cc -std=gnu17 -O2 -Wall -Wextra -Werror -o "$bin/burst" "$here/burst.c" -ldl
case $version in
  2.0.*) immediate=MIMALLOC_DECOMMIT_DELAY=0 ;;
  *)     immediate=MIMALLOC_PURGE_DELAY=0 ;;
esac
# Drop any MIMALLOC_* the caller exported, so "default" means defaults.
clean=$(env | sed -n 's/^\(MIMALLOC_[A-Za-z_]*\)=.*/-u \1/p' | tr '\n' ' ')
for size in 4096 1000; do
  for activity in none unrelated same; do
    for purge in default immediate; do
      case $purge in default) envs= ;; immediate) envs=$immediate ;; esac
      f=$out/burst-$version-$size-$activity-$purge.trace
      echo "== $f" >&2
      # shellcheck disable=SC2086
      env $clean $envs LD_PRELOAD="$lib" nice "$bin/burst" "$f" \
        --size "$size" --activity "$activity" $extra >/dev/null
    done
  done
done
