#!/bin/sh
# scripts/measure/mimalloc/run_c.sh -- runs the C measurement programs on one
# mimalloc library: burst.c for every size, activity and purge setting
# (burst-VERSION-SIZE-ACTIVITY-PURGE.trace) and churn.c with default and
# immediate purge (churn-VERSION-PURGE.trace), into OUTDIR.
#
# With the default purge delay what a burst's frees give back depends on
# the time between frees (a purge runs when a later free finds it expired),
# and on a shared machine that time is not even, so those runs also record
# every call (burst --events) and are kept a second time as a binary trace,
# burst-VERSION-SIZE-ACTIVITY-default.astrace, that replays at the program's
# own times (`allocsim convert`; ALLOCSIM names the binary, default
# build/cli/allocsim).  The .trace files replay the lab-purge workload with
# the measured phase durations spread evenly.
#
# Usage: scripts/measure/mimalloc/run_c.sh LIB VERSION [OUTDIR [EXTRA]]
#   LIB      the libmimalloc.so to LD_PRELOAD (Debian 12's 2.0.9 is
#            /usr/lib/x86_64-linux-gnu/libmimalloc.so.2; other versions are
#            built by hand from github.com/microsoft/mimalloc, see
#            docs/models/mimalloc.md)
#   VERSION  2.0.9, 2.1.2, ... (2.0.x spells immediate purge
#            MIMALLOC_DECOMMIT_DELAY=0, later versions MIMALLOC_PURGE_DELAY=0)
#   EXTRA    more arguments for both programs, e.g. --idle-s 5
# The binaries go to a temporary directory.  Runs under nice.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
lib=$1
version=$2
out=${3:-$root/data/measured}
extra=${4:-}
allocsim=${ALLOCSIM:-$root/build/cli/allocsim}
[ -f "$lib" ] || { echo "run_c.sh: $lib: no such library" >&2; exit 1; }
[ -x "$allocsim" ] || { echo "run_c.sh: $allocsim: not built" >&2; exit 1; }
bin=$(mktemp -d "${TMPDIR:-/tmp}/allocsim-mimalloc.XXXXXX")
trap 'rm -rf "$bin"' EXIT
mkdir -p "$out"
for prog in burst churn; do
  cc -std=gnu17 -O2 -Wall -Wextra -Werror -o "$bin/$prog" "$here/$prog.c" -ldl
done
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
      if [ "$purge" = default ]; then
        # shellcheck disable=SC2086
        env $clean $envs LD_PRELOAD="$lib" nice "$bin/burst" "$bin/full.trace" \
          --size "$size" --activity "$activity" --events $extra >/dev/null
        grep -v -E '^[0-9]+ 0 (malloc|free|purge) |^#@ events=' \
          "$bin/full.trace" >"$f"
        "$allocsim" convert "$bin/full.trace" "${f%.trace}.astrace" >&2
      else
        # shellcheck disable=SC2086
        env $clean $envs LD_PRELOAD="$lib" nice "$bin/burst" "$f" \
          --size "$size" --activity "$activity" $extra >/dev/null
      fi
    done
  done
done
for purge in default immediate; do
  case $purge in default) envs= ;; immediate) envs=$immediate ;; esac
  f=$out/churn-$version-$purge.trace
  echo "== $f" >&2
  # shellcheck disable=SC2086
  env $clean $envs LD_PRELOAD="$lib" nice "$bin/churn" "$f" >/dev/null
done
