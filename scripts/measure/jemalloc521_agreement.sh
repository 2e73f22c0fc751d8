#!/bin/sh
# scripts/measure/jemalloc521_agreement.sh -- how often the jemalloc model,
# run as 5.2.1, agrees with a real 5.2.1 library in each of the six
# differential configurations.
#
#   scripts/measure/jemalloc521_agreement.sh LIB [RUNS] [TEST]
#
# LIB is a libjemalloc.so.2 of 5.2.1 (a build of the tag, as
# docs/models/jemalloc.md says); TEST the differential test binary
# (default build/tests/test_jemalloc_differential; a copy linked against
# another userland by scripts/measure/distro_debs.sh works too).  Each run
# is a fresh process with its own address layout; 5.2.1 merges extents of
# neighbouring mappings, so agreement depends on where mappings land.
# Prints, per configuration, the runs in which every checkpoint was equal.
set -eu
lib=${1:?usage: jemalloc521_agreement.sh LIB [RUNS] [TEST]}
runs=${2:-10}
test=${3:-build/tests/test_jemalloc_differential}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
  ALLOCSIM_JEMALLOC_521_LIB=$lib ALLOCSIM_JEMALLOC_521_ALL=1 "$test" \
    2>&1 | grep -E '^\[ +(OK|FAILED) +\] v521_' >> "$log" || true
  i=$((i + 1))
done
for c in no_retain decay_slow decay_0 decay_never no_tcache one_arena; do
  ok=$(grep -c "OK .*\] v521_$c\$" "$log" || true)
  echo "5.2.1 $c: equal at every checkpoint in $ok of $runs runs"
done
