#!/usr/bin/env bash
# tests/integration/test_report.sh -- allocsim report as a person sees it:
# builds the three kinds of report (a trace file, a recorded run with
# measurements, a sweep), opens each in headless Chromium with the network
# off, and fails on a console error, a failed request or a plot without its
# expected series; keeps a screenshot of each page beside the build
# (BUILD/test-artifacts/report-*.png) and checks the pages load nothing.
#   usage: test_report.sh BUILD_DIR SOURCE_DIR
# Exit 77 (ctest: skipped) when gnuplot or chromium is not installed.
set -euo pipefail
build=$1 src=$2
bin=$build/cli/allocsim
for tool in gnuplot chromium; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
art=$build/test-artifacts
mkdir -p "$art"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" report "$src/data/example.trace" --model glibc -o "$work/trace.html" \
  --png "$work" 2>/dev/null || fail "report of a trace"
# A measured spike run of the reference store, by its source: ids change
# when scripts/record_reference.sh records the store again.
spike=$(sqlite3 "file:$src/data/reference.db?mode=ro" "SELECT id FROM runs
  WHERE kind = 'measured' AND source LIKE '%/spike-default-r1.trace'")
[ -n "$spike" ] || fail "no spike-default-r1 run in data/reference.db"
"$bin" report "$spike" --db "$src/data/reference.db" -o "$work/run.html" \
  2>/dev/null || fail "report of a recorded run"
"$bin" sweep survivors --vary fraction=1e-4,1e-3,1e-2 --size 512 \
  --db "$work/sweep.db" >/dev/null 2>&1 || fail "sweep"
# The measured survivors runs of this machine, beside the sweep's points.
for t in "$src"/data/measured/survivors-s512-*.trace; do
  "$bin" record "$t" --db "$work/sweep.db" >/dev/null || fail "record $t"
done
"$bin" report sweep:1 --db "$work/sweep.db" -o "$work/sweep.html" \
  2>/dev/null || fail "report of a sweep"
for png in rss owners; do
  [ -s "$work/$png.png" ] || fail "--png wrote no $png.png"
done
ls "$work"/map*.png >/dev/null 2>&1 || fail "--png wrote no heap map"

# Mark labels are the traced program's text: escaped in the page (the
# script mark is where the most is freed but held, so it is explained).
# Sixty more marks (each a labelled line in the RSS plot, once past the
# plot script's old fixed 8 KiB) still give the plot.
{
  echo "allocsim-trace 1"
  for i in $(seq 0 99); do echo "$i 0 malloc $i 10000"; done
  for i in $(seq 0 2 98); do echo "$((100 + i)) 0 free $i"; done
  echo "200 0 mark <script>document.title='x'</script>"
  for i in $(seq 1 2 99); do echo "$((200 + i)) 0 free $i"; done
  echo "300 0 trim 0"
  for i in $(seq 0 59); do
    echo "$((1000 + i * 2000)) 0 malloc $i $((1000 * (i + 1)))"
    echo "$((2000 + i * 2000)) 0 mark a_rather_long_label_for_mark_number_$i"
  done
} >"$work/marks.trace"
"$bin" report "$work/marks.trace" --model glibc -o "$work/marks.html" \
  2>/dev/null || fail "report of a trace with many marks"
grep -q "What holds memory at &lt;script&gt;" "$work/marks.html" ||
  fail "marks.html does not explain the script mark"
grep -q "<script>document" "$work/marks.html" &&
  fail "a mark label went into the page unescaped"
grep -q '<figure id="plot-rss"><svg' "$work/marks.html" ||
  fail "marks.html lost its RSS plot"
# Heap maps of the marks that matter, not the first six: the last mark,
# the one --at explains, and a note of how many have none.
grep -qF "Heap map at mark a_rather_long_label_for_mark_number_59:" \
  "$work/marks.html" || fail "marks.html has no heap map at its last mark"
grep -qF "At 6 of the 61 marks" "$work/marks.html" ||
  fail "marks.html does not say how many marks have no heap map"
# ... and the end, which the page explains (a capture's only mark may be
# the anchor at main, before the program held anything).
grep -qF "Heap map at the end:" "$work/marks.html" ||
  fail "marks.html has no heap map at the end"
"$bin" report "$work/marks.trace" --model glibc -o "$work/marks-at.html" \
  --at a_rather_long_label_for_mark_number_31 2>/dev/null ||
  fail "report --at of a trace with many marks"
grep -qF "Heap map at mark a_rather_long_label_for_mark_number_31:" \
  "$work/marks-at.html" || fail "no heap map at the --at mark"
# A one-unit map's image stays inside its 420-pixel plot (it was twice the
# frame's height), and map cells are drawn sharp.
for h in $(grep -o "<image [^>]*height='[0-9.]*'" "$work/trace.html" |
  sed "s/.*height='//; s/'//"); do
  awk -v h="$h" 'BEGIN { exit !(h < 420) }' ||
    fail "a heap map image $h px high overflows its plot"
done
grep -q "image-rendering:pixelated" "$work/trace.html" ||
  fail "heap maps are not drawn pixelated"

# Every string in a plot script is a quoted gnuplot literal: a mark with
# quotes, a backslash and a command after them, a --png directory with a
# quote, and a sweep that does not vary size (its key says "the workload's
# default size") still plot, and run nothing (gnuplot's working directory
# is a directory in TMPDIR, so ../pwned would be in $work).
printf '%s\n' "allocsim-trace 1" "0 0 malloc 1 10000" \
  "1 0 mark \"it's \\\\ \\\"q\\\"' ; system 'touch ../pwned' ; '\"" \
  "2 0 free 1" >"$work/quotes.trace"
mkdir -p "$work/it's png"
TMPDIR=$work "$bin" report "$work/quotes.trace" --model glibc \
  -o "$work/quotes.html" --png "$work/it's png" 2>"$work/err" ||
  fail "report of a trace with quotes in a mark: $(cat "$work/err")"
[ ! -e "$work/pwned" ] || fail "a mark label ran a gnuplot command"
[ -s "$work/it's png/rss.png" ] || fail "--png into a directory with a quote"
grep -qF "<text>it's \\ \"q\"' ; system 'touch ../pwned' ; '</text>" \
  "$work/quotes.html" || fail "quotes.html lost the mark's label in its plot"
# Labels that are not UTF-8 (a C program's bytes) are read as Latin-1, as
# in JSON: the page and its inlined SVG stay valid UTF-8 (an XML reader
# refuses the SVG otherwise), and valid UTF-8 passes unchanged.
printf 'allocsim-trace 1\n0 0 malloc 1 10000\n1 0 mark st\377rt\n2 0 mark caf\303\251\303\n3 0 free 1\n' \
  >"$work/latin1.trace"
"$bin" report "$work/latin1.trace" --model glibc -o "$work/latin1.html" \
  2>"$work/err" || fail "report of a trace with Latin-1 marks: $(cat "$work/err")"
iconv -f UTF-8 -t UTF-8 "$work/latin1.html" >/dev/null 2>&1 ||
  fail "latin1.html is not valid UTF-8"
grep -qF "<text>stÿrt</text>" "$work/latin1.html" ||
  fail "latin1.html lost the Latin-1 mark in its plot"
grep -qF "caféÃ" "$work/latin1.html" ||
  fail "latin1.html changed a UTF-8 mark or dropped its stray byte"
"$bin" sweep survivors --total 4 --vary fraction=1e-4,1e-3 --layouts 1 \
  --jobs 1 --db "$work/nosize.db" --quiet >/dev/null 2>&1 || fail "sweep"
"$bin" report sweep:1 --db "$work/nosize.db" -o "$work/nosize.html" \
  2>"$work/err" || fail "report of a sweep without size: $(cat "$work/err")"

# The plotted prediction is compare's: anchored at "main" by compare's rule
# (analysis/compare.h), not at the first mark with a measured RSS ("start",
# which still holds start-up: +5.6 MiB off compare's prediction at "main").
printf '%s\n' "allocsim-trace 1" "#@ kind=measured" "#@ model=glibc" \
  "#@ libc=glibc:ncpus=2" "#@ page_size=4096" \
  "1000 0 mark start" "1000 0 rss 3000000" "2000 0 malloc 1 100000" \
  "3000 0 mark main" "3000 0 rss 9000000" "4000 0 malloc 2 5000000" \
  "5000 0 mark grown" "5000 0 rss 14200000" >"$work/anchor.trace"
"$bin" record "$work/anchor.trace" --db "$work/anchor.db" >/dev/null ||
  fail "record anchor.trace"
offset=$("$bin" compare 1 --db "$work/anchor.db" --no-store |
  sed -n 's/^start-up *offset \([-+][0-9.]*\) MiB.*/\1/p')
"$bin" report 1 --db "$work/anchor.db" -o "$work/anchor.html" 2>/dev/null ||
  fail "report of anchor.trace"
grep -qF "predicted RSS ($offset MiB measured at main)" "$work/anchor.html" ||
  fail "the RSS plot is not anchored where compare is (${offset:-no} offset at main): $(grep -o 'predicted RSS ([^<]*' "$work/anchor.html")"

# The report's temporary directory goes with it: when SIGPIPE ends it (its
# page on stdout, the reader gone) and when SIGTERM does; capture --cleanup
# removes one whose report died unseen (SIGKILL).
mkdir "$work/tmp"
TMPDIR=$work/tmp "$bin" report "$spike" --db "$src/data/reference.db" -o - |
  head -c 200 >/dev/null || true
[ -z "$(ls -A "$work/tmp")" ] || fail "report -o - | head left $(ls "$work/tmp")"
for sig in TERM KILL; do
  TMPDIR=$work/tmp "$bin" report "$spike" --db "$src/data/reference.db" \
    -o "$work/killed.html" 2>/dev/null &
  for _ in $(seq 100); do
    ls "$work/tmp"/allocsim-report-* >/dev/null 2>&1 && break
    sleep 0.05
  done
  kill -"$sig" $! && ! wait $! || fail "report outlived SIG$sig"
done
TMPDIR=$work/tmp "$bin" capture --cleanup >/dev/null ||
  fail "capture --cleanup"
[ -z "$(ls -A "$work/tmp")" ] || fail "a killed report left $(ls "$work/tmp")"
[ ! -e "$work/killed.html" ] || fail "a killed report wrote its page"

# A report path in a missing directory is refused before any work.
if "$bin" report "$src/data/example.trace" -o "$work/nodir/x.html" 2>"$work/err"; then
  fail "a report into a missing directory succeeded"
fi
grep -q "no such directory" "$work/err" || fail "missing-directory message: $(cat "$work/err")"

# Nothing in a page may point outside it.
for page in trace run sweep; do
  if grep -Eo '(src|href)="(https?:)?//[^"]*' "$work/$page.html" | grep -q .; then
    fail "$page.html refers to the network"
  fi
done

chrome() { # chrome PAGE ARGS...: headless, network off, fresh profile
  local page=$1; shift
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$work/profile-$page" \
    --proxy-server=127.0.0.1:9 --enable-logging=stderr --v=0 \
    "$@" "file://$work/$page.html"
}

# No line may widen the page past a 1200-pixel window (a model spec, one
# long word, did): a copy of the page with a script that records whether
# the document is wider than the window.
fits_window() { # fits_window PAGE
  sed 's|</body>|<script>document.body.dataset.overflow = document.documentElement.scrollWidth > innerWidth</script></body>|' \
    "$work/$1.html" >"$work/$1-fit.html"
  chrome "$1-fit" --window-size=1200,900 --dump-dom 2>/dev/null |
    grep -q 'data-overflow="false"' ||
    fail "$1.html is wider than a 1200-pixel window"
}

check_page() { # check_page PAGE SERIES...
  local page=$1; shift
  chrome "$page" --dump-dom >"$work/$page.dom" 2>"$work/$page.log" ||
    fail "chromium could not load $page.html"
  if grep -E 'CONSOLE|Uncaught|net::ERR_' "$work/$page.log"; then
    fail "$page.html: console error or failed request"
  fi
  for series in "$@"; do
    grep -qF ">$series</text>" "$work/$page.dom" ||
      fail "$page.html: no plot series '$series' in the rendered page"
  done
  chrome "$page" --window-size=1200,2400 --screenshot="$art/report-$page.png" \
    >/dev/null 2>&1 || fail "screenshot of $page.html"
  [ -s "$art/report-$page.png" ] || fail "empty screenshot of $page.html"
  fits_window "$page"
}

check_page trace "predicted RSS" "live bytes" "libc_heap" "not resident"
check_page run "predicted RSS (+11.48 MiB measured at start)" "measured RSS" "pymalloc" "not resident" "before the trace (measured)"
check_page sweep "512 B, 4 KiB pages: simulated" "formula (1 - p)^k" "measured"
grep -q "What holds memory" "$work/run.dom" || fail "run.html has no explain table"
grep -q "What would release it" "$work/run.dom" || fail "run.html has no remedies"
grep -q "The formula against the recorded runs" "$work/sweep.dom" ||
  fail "sweep.html has no formula validation table"
echo "report test passed; screenshots in $art"
