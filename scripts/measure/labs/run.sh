#!/bin/sh
# scripts/measure/labs/run.sh -- records measured-run files of the C labs of
# the allocator course notes (section 20) for every variant in
# data/measured/.  The programs are the ones CMake builds into build/labs
# (this directory's CMakeLists.txt), which `allocsim lab NAME --measure`
# runs too.
#
# Usage: scripts/measure/labs/run.sh [OUTDIR [PART...]]
#   OUTDIR defaults to data/measured; PARTs (default all): sizes brk mmap
#   arenas arenas-hold pin cliff compare leak
# $ALLOCSIM_LABS_DIR overrides build/labs.  Runs under nice: the machine is
# shared.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$root/data/measured}
[ $# -gt 0 ] && shift
parts=${*:-sizes brk mmap arenas arenas-hold pin cliff compare leak}
want() { case " $parts " in *" $1 "*) return 0;; esac; return 1; }
bin=${ALLOCSIM_LABS_DIR:-$root/build/labs}
for lab in lab_sizes lab_brk lab_mmap_threshold lab_arenas; do
  [ -x "$bin/$lab" ] || { echo "run.sh: no $bin/$lab: build first" >&2; exit 1; }
done
mkdir -p "$out"
# env -u makes "unset" explicit even if the caller exported a MALLOC_* knob.
clean="env -u MALLOC_ARENA_MAX -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u MALLOC_TOP_PAD_ -u MALLOC_ARENA_TEST -u GLIBC_TUNABLES"
# Lab 1 under glibc and under each allocator installed here (its ladder
# goes to FILE.ladder beside the measured run).
if want sizes; then
  $clean nice "$bin/lab_sizes" "$out/lab-sizes-glibc.trace" >/dev/null
  for lib in jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2 \
             tcmalloc:libtcmalloc_minimal.so.4; do
    name=${lib%%:*}
    path=$(ldconfig -p | awk -v l="${lib#*:}" '$1 == l {print $NF; exit}')
    [ -n "$path" ] || { echo "run.sh: no ${lib#*:}: lab-sizes-$name skipped" >&2; continue; }
    $clean LD_PRELOAD="$path" nice "$bin/lab_sizes" \
      "$out/lab-sizes-$name.trace" >/dev/null
  done
fi
want brk && $clean nice "$bin/lab_brk" "$out/lab-brk.trace" >/dev/null
if want mmap; then
  $clean nice "$bin/lab_mmap_threshold" "$out/lab-mmap-threshold.trace" \
    >/dev/null
  $clean MALLOC_MMAP_THRESHOLD_=131072 nice "$bin/lab_mmap_threshold" \
    "$out/lab-mmap-threshold-mmap131072.trace" >/dev/null
fi
# Lab 5's RSS moves in 64 KiB steps between identical runs, so each setting
# runs 7 times and the docs use the median.  The control (--iterations 0:
# same threads, no malloc) measures what thread stacks and TLS cost.
for k in 1 2 3 4 5 6 7; do
  want arenas || break
  $clean nice "$bin/lab_arenas" "$out/lab-arenas-control-r$k.trace" 64 0 \
    >/dev/null
  $clean nice "$bin/lab_arenas" "$out/lab-arenas-r$k.trace" >/dev/null
  $clean MALLOC_ARENA_MAX=8 nice "$bin/lab_arenas" \
    "$out/lab-arenas-arenamax8-r$k.trace" >/dev/null
  $clean MALLOC_ARENA_MAX=1 nice "$bin/lab_arenas" \
    "$out/lab-arenas-arenamax1-r$k.trace" >/dev/null
done
# Lab 5 with a working set per thread (`allocsim lab arenas`): no loop,
# then each thread in turn keeps the last of 1000 blocks of 1 KiB.
hold="64 0 1024 1000"
for k in 1 2 3 4 5 6 7; do
  want arenas-hold || break
  $clean nice "$bin/lab_arenas" "$out/lab-arenas-hold1000-r$k.trace" $hold \
    >/dev/null
  $clean MALLOC_ARENA_MAX=8 nice "$bin/lab_arenas" \
    "$out/lab-arenas-hold1000-arenamax8-r$k.trace" $hold >/dev/null
  $clean MALLOC_ARENA_MAX=1 nice "$bin/lab_arenas" \
    "$out/lab-arenas-hold1000-arenamax1-r$k.trace" $hold >/dev/null
done
# Lab 8 (pin): the survivors study's program with the lab's numbers,
# 1,000,000 objects of 64 B, 100 kept by stride or oldest; 5 runs each.
pin="--size 64 --total 61.03515625"
for k in 1 2 3 4 5; do
  want pin || break
  $clean -u PYTHONMALLOC nice python3 "$bin/survivors.py" $pin \
    --pattern stride --every 10000 --out "$out/lab-pin-stride-r$k.trace" \
    >/dev/null 2>&1
  $clean -u PYTHONMALLOC nice python3 "$bin/survivors.py" $pin \
    --pattern oldest --fraction 1e-4 --out "$out/lab-pin-oldest-r$k.trace" \
    >/dev/null 2>&1
done
# Lab 2 (cliff): tuples either side of 512 bytes under each PYTHONMALLOC;
# 3 runs each (the time column takes the least over them).
for k in 1 2 3; do
  want cliff || break
  for pm in pymalloc malloc; do
    $clean PYTHONMALLOC=$pm nice python3 "$bin/lab_cliff.py" \
      --out "$out/lab-cliff-$pm-r$k.trace" >/dev/null
  done
done
# Lab 9 (compare): the load-spike study's program under jemalloc, 3 runs;
# its runs under glibc, tcmalloc and mimalloc are the study's own
# (scripts/measure/run_spike.sh, run_tcmusl.sh, mimalloc/).
for k in 1 2 3; do
  want compare || break
  path=$(ldconfig -p | awk '$1 == "libjemalloc.so.2" {print $NF; exit}')
  [ -n "$path" ] || { echo "run.sh: no libjemalloc.so.2: compare skipped" >&2; break; }
  $clean -u PYTHONMALLOC LD_PRELOAD="$path" nice python3 "$bin/spike.py" \
    --out "$out/lab-compare-jemalloc-r$k.trace" >/dev/null 2>&1
done
# Lab 7 (leak): 3 measured runs (RSS and tracemalloc's count), and the
# capture `allocsim lab leak` replays, made with the system interpreter
# (a pyenv shim would run dozens of processes under the capture).
if want leak; then
  for k in 1 2 3; do
    $clean -u PYTHONMALLOC nice python3 "$bin/lab_leak.py" \
      --out "$out/lab-leak-r$k.trace" 2>/dev/null
  done
  $clean -u PYTHONMALLOC nice "$root/build/cli/allocsim" capture \
    -o "$out/../captures/lab-leak.astrace" -- /usr/bin/python3 \
    "$bin/lab_leak.py" >/dev/null 2>&1
fi
for f in lab-sizes-glibc lab-brk lab-mmap-threshold lab-mmap-threshold-mmap131072 \
         lab-arenas-r1 lab-arenas-arenamax8-r1 lab-arenas-arenamax1-r1 \
         lab-arenas-hold1000-r1 lab-arenas-hold1000-arenamax8-r1 \
         lab-arenas-hold1000-arenamax1-r1; do
  [ -f "$out/$f.trace" ] || continue
  echo "== $f"
  grep -v '^#@' "$out/$f.trace" | grep -v '^allocsim' || true
  grep '^#@ arenas=' "$out/$f.trace" || true
done
