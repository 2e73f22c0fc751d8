#!/bin/sh
# scripts/validate_survivors.sh -- validate the survivors workload and the
# CPython model: against the published survivors study, and against runs
# measured on this machine (data/measured/survivors-*.trace).
#
# usage: scripts/validate_survivors.sh [--measure] [--build DIR] [--db FILE]
#   --measure   first re-measure the runs with CPython 3.11 (about 5 minutes
#               of one core; nice'd): the files in data/measured are replaced
#   --build DIR a Release build directory (default: build)
#   --db FILE   also record each measured run and `allocsim compare` it
#               into FILE (default: a temporary store, deleted)
# Prints markdown tables (published vs simulated vs formula; measured vs
# simulated vs formula) ready for docs/survivors.md.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
DB=
MEASURE=0
while [ $# -gt 0 ]; do
  case $1 in
    --measure) MEASURE=1 ;;
    --build) BUILD=$2; shift ;;
    --db) DB=$2; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "validate_survivors.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
ALLOCSIM=$BUILD/cli/allocsim
PUBLISHED=$BUILD/tests/test_survivors_published
for f in "$ALLOCSIM" "$PUBLISHED"; do
  [ -x "$f" ] || { echo "validate_survivors.sh: $f: not built (cmake --build $BUILD)" >&2; exit 1; }
done
PY=${PYTHON:-/usr/bin/python3.11}

if [ $MEASURE = 1 ]; then
  run() {
    name=$1; shift
    echo "measuring $name" >&2
    nice -n 10 "$PY" "$ROOT/scripts/measure/survivors.py" "$@" \
      --out "$ROOT/data/measured/survivors-$name.trace"
  }
  for f in 1e-5 3e-5 1e-4 3e-4 1e-3; do run s64-random-$f --size 64 --fraction $f --seed 1; done
  for f in 1e-4 3e-4 1e-3 3e-3 1e-2; do run s512-random-$f --size 512 --fraction $f --seed 1; done
  run s64-stride-1000 --size 64 --pattern stride --every 1000
  run s64-oldest-0.01 --size 64 --pattern oldest --fraction 0.01
  run s64-random-1e-3-reuse128 --size 64 --fraction 1e-3 --seed 1 --reuse-size 128 --reuse-total 256
  run s64-random-1e-2-reuse128 --size 64 --fraction 1e-2 --seed 1 --reuse-size 128 --reuse-total 256
fi

echo "## Published survivors study vs simulation (CPython 3.14 model) vs formula"
echo
nice "$PUBLISHED" | grep '^|'
echo
echo "## Measured here vs simulation vs formula"
echo
nice "$PY" "$ROOT/scripts/measure/compare_survivors.py" --allocsim "$ALLOCSIM"

# The same runs through the store: record, then compare (baseline-anchored
# at `start`; errors at `after` equal the table's kept-memory errors).
TMPDB=
if [ -z "$DB" ]; then
  TMPDB=$(mktemp -u /tmp/validate-survivors-XXXXXX.db)
  DB=$TMPDB
fi
echo
echo "## allocsim record + compare (store: $DB)"
echo
for f in "$ROOT"/data/measured/survivors-*.trace; do
  id=$("$ALLOCSIM" record "$f" --db "$DB" | sed -n 's/.* as measured run \([0-9]*\) .*/\1/p')
  err=$(nice "$ALLOCSIM" compare "$id" --db "$DB" | awk '$1 == "after" {print $4}')
  echo "- $(basename "$f"): error at after $err MiB"
done
[ -n "$TMPDB" ] && rm -f "$TMPDB" "$TMPDB-wal" "$TMPDB-shm"
exit 0
