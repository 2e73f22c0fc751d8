#!/usr/bin/env bash
# scripts/docs/report_screenshot.sh -- regenerates docs/images/report.png,
# the report screenshot README shows: `allocsim report` of the recorded
# load-spike run in data/reference.db, rendered by headless Chromium.
#   usage: scripts/docs/report_screenshot.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run=$(sqlite3 "$here/data/reference.db" \
  "SELECT id FROM runs WHERE source LIKE '%spike-default-r1%' LIMIT 1")
"$build/cli/allocsim" report "$run" --db "$here/data/reference.db" \
  --title "allocsim report: the load-spike run" -o "$tmp/report.html"
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic \
  --no-first-run --disable-background-networking --disable-component-update \
  --disable-sync --user-data-dir="$tmp/profile" --window-size=1100,1500 \
  --hide-scrollbars --screenshot="$here/docs/images/report.png" \
  "file://$tmp/report.html" >/dev/null 2>&1
echo "wrote docs/images/report.png"
