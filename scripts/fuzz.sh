#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] -- builds every libFuzzer target in tests/fuzz
# (fuzz_*.c; clang, ASan + UBSan, installed with apt-get if missing) and runs
# each for SECONDS (default 60) on a fresh corpus seeded from the
# repository's traces.  A crash, a leak, a sanitizer report, an input slower
# than 30 s or more than 2 GiB of memory fails the script, which then names
# the input libFuzzer saved.  Prints the executions of each target.
#
# ALLOCSIM_FUZZ_BUILD_DIR chooses the build directory (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
build_dir="${ALLOCSIM_FUZZ_BUILD_DIR:-build-fuzz}"

# clang with its libFuzzer runtime (Debian 12: clang-14, libclang-rt-14-dev).
if ! command -v clang >/dev/null ||
   ! clang -print-file-name=libclang_rt.fuzzer-x86_64.a | grep -q /; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq \
    clang libclang-rt-14-dev >&2
fi
./scripts/build.sh "$build_dir" -DCMAKE_C_COMPILER=clang \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSIM_FUZZ=ON -DBUILD_TESTING=OFF

work="$build_dir/fuzz-work"
rm -rf "$work"
mkdir -p "$work"

# Seeds: the parsers start from real inputs; the model target needs none
# (every input is a trace, the empty one too).
seed() {
  local target=$1 dir=$2
  case "$target" in
    fuzz_trace_text)
      cp data/example.trace data/measured/*.trace tests/data/callsites.trace \
        "$dir"/ ;;
    fuzz_trace_binary)
      for t in data/example.trace data/measured/lab-*.trace \
        tests/data/callsites.trace; do
        "$build_dir/cli/allocsim" convert "$t" \
          "$dir/$(basename "$t" .trace).astrace" 2>/dev/null
        "$build_dir/cli/allocsim" convert "$t" --format binary-v2 \
          "$dir/$(basename "$t" .trace)-v2.astrace" 2>/dev/null
      done ;;
    fuzz_import_mtrace)
      cp tests/data/mtrace_*.log "$dir"/ ;;
    fuzz_import_heaptrack)
      # The compressed files, and their text where the tools exist.
      for f in tests/data/heaptrack/*.zst tests/data/heaptrack/*.gz; do
        cp "$f" "$dir"/
        case "$f" in
          *.zst) tool=zstd ;;
          *) tool=gzip ;;
        esac
        if command -v "$tool" >/dev/null; then
          "$tool" -dc "$f" >"$dir/$(basename "$f").txt"
        fi
      done ;;
    fuzz_import_malloclab)
      # One small request file in each layout the importer reads (2002: heap
      # hint, ids, ops, weight; Autolab: weight, ids, ops, ignore-ranges).
      printf '20000\n3\n6\n1\na 0 2040\na 1 2040\nf 1\na 2 48\nr 0 4072\nf 0\n' \
        >"$dir/2002.rep"
      printf '0 4 8 0\nf -1\nr 0 10\nr 0 0\nf 0\na 1 100\na 1 200\na 3 16\nr 2 5\n' \
        >"$dir/autolab.rep" ;;
  esac
}

failed=0
for exe in "$build_dir"/tests/fuzz/fuzz_*; do
  [ -x "$exe" ] || continue
  name=$(basename "$exe")
  corpus="$work/$name/corpus"
  mkdir -p "$corpus"
  seed "$name" "$corpus"
  log="$work/$name/log"
  # Target-specific libFuzzer flags, if any, in tests/fuzz/TARGET.flags.
  flags=()
  [ -f "tests/fuzz/$name.flags" ] && read -r -a flags <"tests/fuzz/$name.flags"
  if nice "$exe" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$work/$name/" "${flags[@]}" \
       "$corpus" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "$name: ${runs:-?} executions in ${secs} s, no failure"
  else
    failed=1
    echo "$name: FAILED; what the target and the sanitizers said, then the" \
      "last lines of $log:" >&2
    grep -E "^($name:|==[0-9]+==(ERROR|WARNING)|SUMMARY)" "$log" | head -n 5 >&2
    grep -v '^#[0-9]' "$log" | tail -n 25 >&2
    # The saved input, as base64 when small: a CI log is then enough to
    # reproduce (base64 -d >crash; build-fuzz/tests/fuzz/TARGET crash).
    for f in "$work/$name"/crash-* "$work/$name"/leak-* \
      "$work/$name"/timeout-* "$work/$name"/oom-*; do
      [ -f "$f" ] || continue
      echo "$f ($(stat -c %s "$f") bytes)" >&2
      [ "$(stat -c %s "$f")" -le 8192 ] && base64 -w 0 "$f" >&2 && echo >&2
    done
  fi
done
exit "$failed"
