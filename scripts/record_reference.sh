#!/bin/sh
# scripts/record_reference.sh -- re-creates data/reference.db, the store of
# runs measured on a real machine that ships with allocsim.
#
#   scripts/record_reference.sh [BUILD_DIR]        (default: build)
#
# It records, as runs of kind measured:
#   1. captures made here with `allocsim capture` (traces kept beside the
#      store in data/captures/, referenced relative to it):
#        - tests/integration/capture_progs/survivors.py under /usr/bin/python3
#          (CPython: obj/mem domains), n = 50000;
#        - the C program capture_progs/churn, n = 50000, on glibc and with
#          gperftools tcmalloc preloaded;
#        - spike.py and webworker.py (reduced) under Debian's libjemalloc2
#          through LD_PRELOAD, 1 and 16 threads;
#   2. every measured-run file in data/measured/*.trace and *.astrace
#      (`allocsim record`; the binary ones carry every event of a C program
#      that recorded its own trace, scripts/measure/alloc_phases.c);
#   3. ten real programs (sqlite3, gzip, sort, git, tar, perl, xz, a shell
#      chain and two CPython scripts) captured by
#      scripts/measure/real_programs.py, traces in data/captures/, on glibc
#      and with each of jemalloc, mimalloc and tcmalloc preloaded that is
#      installed;
#   4. heaptrack's records of real programs, data/imported/*.astrace, and
#      the oracle's runs, data/oracle/* (both made by
#      scripts/measure/oracle/run.py); an oracle run of an allocator that no
#      registered model covers cannot be recorded yet and is skipped with a
#      line saying so.
# Then it prints `allocsim compare` for every run (not stored: comparisons
# depend on the model version, the reference holds measurements only).
#
# Needs the build's allocsim, liballocsim_capture.so and capture programs
# (cmake --build BUILD_DIR --target allocsim capture_prog_churn).  The
# machine's provenance (kernel, glibc, CPython, page size, MALLOC_* knobs)
# is recorded with each capture.  Exit status: non-zero on the first
# failure.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$here/$build ;; esac
allocsim=$build/cli/allocsim
progs=$build/tests/integration/capture_progs
db=$here/data/reference.db
caps=$here/data/captures

for f in "$allocsim" "$progs/churn"; do
  [ -x "$f" ] || { echo "record_reference.sh: $f: not built" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$caps"
rm -f "$db" "$db-wal" "$db-shm"

cd "$here/data"
echo "== captures" >&2
"$allocsim" capture -o captures/python-survivors.astrace --db "$db" \
  --sample-every 10ms -- /usr/bin/python3 \
  "$here/tests/integration/capture_progs/survivors.py" 50000 100 >&2
"$allocsim" capture -o captures/c-churn.astrace --db "$db" \
  --sample-every 10ms -- "$progs/churn" 50000 >&2
# The same program with gperftools tcmalloc preloaded (compare picks the
# tcmalloc model from LD_PRELOAD), when Debian's library is installed.
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
if [ -e "$tc" ]; then
  LD_PRELOAD=$tc "$allocsim" capture -o captures/c-churn-tcmalloc.astrace \
    --db "$db" --sample-every 10ms -- "$progs/churn" 50000 >&2
fi
# Python preloading Debian's libjemalloc2 (docs/models/jemalloc.md): the
# spike and webworker scripts, reduced, at 1 and 16 threads.
je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
if [ -e "$je" ]; then
  for t in 1 16; do
    LD_PRELOAD=$je "$allocsim" capture \
      -o captures/python-spike-jemalloc-t$t.astrace --db "$db" \
      --sample-every 10ms -- /usr/bin/python3 \
      "$here/scripts/measure/spike.py" --out "$tmp/spike.trace" \
      --count 10000 --threads $t >&2
    LD_PRELOAD=$je "$allocsim" capture \
      -o captures/python-webworker-jemalloc-t$t.astrace --db "$db" \
      --sample-every 10ms -- /usr/bin/python3 \
      "$here/scripts/measure/webworker.py" --out "$tmp/webworker.trace" \
      --requests 200 --cache-mb 4 --shrink-mb 1 --idle-s 2 --threads $t >&2
  done
fi

echo "== measured-run files" >&2
for f in measured/*.trace measured/*.astrace; do
  [ -e "$f" ] || continue
  "$allocsim" record "$f" --db "$db" >/dev/null
  echo "recorded $f" >&2
done

echo "== real programs (scripts/measure/real_programs.py)" >&2
# glibc, and each preloadable allocator Debian's package installed here
allocators=glibc
lib=/usr/lib/x86_64-linux-gnu
for a in jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2 \
         tcmalloc:libtcmalloc_minimal.so.4; do
  [ -e "$lib/${a#*:}" ] && allocators="$allocators,${a%%:*}"
done
/usr/bin/python3 "$here/scripts/measure/real_programs.py" "$allocsim" \
  --db "$db" --traces "$caps" --work "$tmp/programs" \
  --allocators "$allocators" >&2

echo "== heaptrack imports and oracle runs" >&2
for f in imported/*.astrace oracle/*.trace oracle/*.astrace \
         oracle/*.astrace.zst oracle/*.astrace.gz; do
  [ -e "$f" ] || continue
  case $f in
    oracle/*--*)
      a=${f#oracle/}
      a=${a%%--*}
      if ! "$allocsim" models "$a" >/dev/null 2>&1; then
        echo "skipped $f: no $a model is registered yet" >&2
        continue
      fi ;;
  esac
  if "$allocsim" record "$f" --db "$db" >/dev/null 2>"$tmp/record.err"; then
    echo "recorded $f" >&2
  else
    echo "skipped $f: $(cat "$tmp/record.err")" >&2
  fi
done

echo "== compare (not stored; runs without a trace or workload, such as"\
     "interpreter baselines, are reported and skipped)" >&2
n=$(sqlite3 "$db" "SELECT max(id) FROM runs" 2>/dev/null || echo "")
if [ -z "$n" ]; then
  # Without the sqlite3 shell, walk ids until a run is missing.
  n=0
  while "$allocsim" compare $((n + 1)) --db "$db" --no-store --json; do
    n=$((n + 1))
  done
  exit 0
fi
i=1
while [ "$i" -le "$n" ]; do
  "$allocsim" compare "$i" --db "$db" --no-store --json || true
  i=$((i + 1))
done
