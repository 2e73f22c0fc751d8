#!/bin/sh
# scripts/measure/run_tcmusl.sh -- measures gperftools tcmalloc (Debian 12's
# libtcmalloc_minimal.so.4, 2.10) and musl 1.2.3's mallocng on this machine.
#
#   scripts/measure/run_tcmusl.sh OUTDIR [REPEATS]      (default 2 repeats)
#
# Builds scripts/measure/alloc_phases.c three ways into OUTDIR/bin: with gcc
# (glibc; tcmalloc is LD_PRELOADed into it), with musl-gcc (dynamic, as
# programs on Alpine are) and with musl-gcc -static.  Then runs, each REPEATS
# times, under nice (the machine is shared), writing OUTDIR/NAME-rK.trace
# (allocsim measured-run files with every event) and, under tcmalloc,
# OUTDIR/NAME-rK.props (MallocExtension numeric properties at every mark):
#   burst-glibc             the burst/free/idle program on glibc (reference)
#   burst-tcmalloc          ... under tcmalloc, defaults
#   burst-tcmalloc-rate10   TCMALLOC_RELEASE_RATE=10
#   burst-tcmalloc-aggressive  TCMALLOC_AGGRESSIVE_DECOMMIT=1
#   burst-tcmalloc-tc1m     TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=1048576
#   burst-musl, burst-musl-static
#   rounds-tcmalloc         64 burst rounds (crosses tcmalloc's first
#                           incremental scavenge; run once, props kept)
#   churn-tcmalloc, churn-musl   the capture test program's sequence
#   bounce-musl             1000 x malloc(5000)/free (mallocng bounce counter)
#   cycle-tcmalloc, cycle-tcmalloc-rate10
#                           1200 x malloc(2 MiB)/free: past the 2^18-page
#                           countdown before tcmalloc's first scavenge
#   spike-tcmalloc-t1, spike-tcmalloc-t16        scripts/measure/spike.py
#   webworker-tcmalloc-t1, webworker-tcmalloc-t16  scripts/measure/webworker.py
# ONLY=REGEX in the environment runs just the names it matches (grep -E),
# e.g. ONLY='^(burst|churn|cycle)-tcmalloc' for the C runs under tcmalloc.
# For bounce-musl it also counts the mmap and munmap calls with strace, if
# strace is installed (OUTDIR/bounce-musl.syscalls).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_tcmusl.sh OUTDIR [REPEATS]}
reps=${2:-2}
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
py=/usr/bin/python3
mkdir -p "$out/bin"
for f in "$tc" "$py"; do
  [ -e "$f" ] || { echo "run_tcmusl.sh: $f: missing" >&2; exit 1; }
done
command -v musl-gcc >/dev/null ||
  { echo "run_tcmusl.sh: musl-gcc missing (apt-get install musl-tools)" >&2; exit 1; }

src=$here/alloc_phases.c
flags="-std=c17 -O2 -Wall -Wextra -Werror"
gcc $flags -o "$out/bin/alloc_phases" "$src"
musl-gcc $flags -o "$out/bin/alloc_phases_musl" "$src"
musl-gcc $flags -static -o "$out/bin/alloc_phases_musl_static" "$src"

pkgver() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo unknown; }
tcver="gperftools-$(pkgver libtcmalloc-minimal4)"
muslver="musl-$(pkgver musl)"
n=nice
command -v nice >/dev/null || n=

only=${ONLY:-.}
wanted() { printf '%s\n' "$1" | grep -Eq -- "$only"; }

# run NAME REPEAT [env VAR=VALUE...] PROGRAM ARGS...
run() {
  name=$1 k=$2
  shift 2
  wanted "$name" || return 0
  echo "== $name r$k" >&2
  $n "$@" --out "$out/$name-r$k.trace" --props "$out/$name-r$k.props"
}

burst="burst --count 20000 --keep-every 10 --seed 1 --idle-ms 2000"
churn="churn --count 50000"
k=1
while [ "$k" -le "$reps" ]; do
  b=$out/bin/alloc_phases
  run burst-glibc "$k" "$b" $burst
  run burst-tcmalloc "$k" env LD_PRELOAD=$tc "$b" $burst --note "allocator_version=$tcver"
  run burst-tcmalloc-rate10 "$k" env LD_PRELOAD=$tc TCMALLOC_RELEASE_RATE=10 \
    "$b" $burst --note "allocator_version=$tcver"
  run burst-tcmalloc-aggressive "$k" env LD_PRELOAD=$tc \
    TCMALLOC_AGGRESSIVE_DECOMMIT=1 "$b" $burst --note "allocator_version=$tcver"
  run burst-tcmalloc-tc1m "$k" env LD_PRELOAD=$tc \
    TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=1048576 "$b" $burst \
    --note "allocator_version=$tcver"
  run burst-musl "$k" "$out/bin/alloc_phases_musl" $burst \
    --note "libc_version=$muslver" --note link=dynamic
  run burst-musl-static "$k" "$out/bin/alloc_phases_musl_static" $burst \
    --note "libc_version=$muslver" --note link=static
  run churn-tcmalloc "$k" env LD_PRELOAD=$tc "$b" $churn --note "allocator_version=$tcver"
  run churn-musl "$k" "$out/bin/alloc_phases_musl" $churn \
    --note "libc_version=$muslver" --note link=dynamic
  run bounce-musl "$k" "$out/bin/alloc_phases_musl" bounce --count 1000 \
    --size 5000 --note "libc_version=$muslver" --note link=dynamic
  run cycle-tcmalloc "$k" env LD_PRELOAD=$tc "$b" bounce --count 1200 \
    --size 2097152 --note "allocator_version=$tcver"
  run cycle-tcmalloc-rate10 "$k" env LD_PRELOAD=$tc TCMALLOC_RELEASE_RATE=10 \
    "$b" bounce --count 1200 --size 2097152 --note "allocator_version=$tcver"
  for t in 1 16; do
    for w in spike webworker; do
      wanted "$w-tcmalloc-t$t" || continue
      echo "== $w-tcmalloc-t$t r$k" >&2
      $n env LD_PRELOAD=$tc "$py" "$here/$w.py" --threads "$t" \
        --out "$out/$w-tcmalloc-t$t-r$k.trace"
    done
  done
  k=$((k + 1))
done

if wanted rounds-tcmalloc; then
  echo "== rounds-tcmalloc" >&2
  $n env LD_PRELOAD=$tc "$out/bin/alloc_phases" burst --count 40000 \
    --keep-every 10 --seed 1 --idle-ms 200 --rounds 64 \
    --note "allocator_version=$tcver" --out "$out/rounds-tcmalloc.trace" \
    --props "$out/rounds-tcmalloc.props"
fi

if wanted bounce-musl-strace && command -v strace >/dev/null; then
  strace -f -e trace=mmap,munmap -o "$out/bounce-musl.strace" \
    "$out/bin/alloc_phases_musl" bounce --count 1000 --size 5000 \
    --out "$out/bounce-musl-strace.trace"
  {
    echo "mmap_16384 $(grep -c 'mmap(NULL, 16384' "$out/bounce-musl.strace")"
    echo "munmap_16384 $(grep -c 'munmap(.*, 16384)' "$out/bounce-musl.strace")"
  } >"$out/bounce-musl.syscalls"
  rm -f "$out/bounce-musl.strace"
fi
echo "run_tcmusl.sh: results in $out" >&2
