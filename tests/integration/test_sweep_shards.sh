#!/usr/bin/env bash
# tests/integration/test_sweep_shards.sh ALLOCSIM SOURCE_DIR -- the GNU
# parallel recipe of docs/store.md run as documented (4 shards, then allocsim
# db merge), and sweeps killed with SIGKILL 50 times, checked consistent
# after each kill and resumed; the stores must equal the unsharded sweep
# point for point (key, kept bytes, formula, pinned arenas, model, page
# size).  Then every ```sql
# query of docs/store.md runs without error, and returns rows on the sweep's
# store or on a copy of data/reference.db with one comparison in it.
set -euo pipefail
. "$(dirname "$0")/sweep_fixture.sh"
allocsim="$(realpath "$1")"
src="$(realpath "$2")"
work="$(mktemp -d /tmp/allocsim-shards.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work"

write_sweep_spec spec.txt


"$allocsim" sweep --spec spec.txt --db whole.db --quiet > /dev/null
digest whole.db > whole.txt
[ "$(wc -l < whole.txt)" -eq 36 ] || { echo "unsharded: $(wc -l < whole.txt) points, expected 36"; exit 1; }

# GNU parallel: one store per shard, merged.
parallel --halt now,fail=1 "$allocsim" sweep --spec spec.txt \
  --shard {}/4 --db part{}.db --quiet '>' /dev/null ::: 0 1 2 3
"$allocsim" db merge merged.db part0.db part1.db part2.db part3.db
"$allocsim" db merge merged.db part2.db | grep -q ': 0 runs, 0 sweeps, 0 sweep points merged' \
  || { echo "merging a shard again copied something"; exit 1; }
digest merged.db > merged.txt
diff -u whole.txt merged.txt || { echo "GNU parallel shards merged differ from the unsharded sweep"; exit 1; }
[ "$("$allocsim" db points merged.db --csv | tail -n +2 | wc -l)" -eq 36 ] \
  || { echo "db points of the merged shards: not the sweep's 36 points"; "$allocsim" db points merged.db; exit 1; }

# SIGINT stops the sweep after its running points: exit 130, and the output
# holds only points that ran (no zero rows for the rest).  The signal is
# sent once the sweep has announced its points, which it does after taking
# SIGINT: a background job of a non-interactive shell starts with SIGINT
# ignored, so a signal sent earlier (after a fixed sleep, on a loaded
# machine under ASan) was lost and the sweep ran to its end.
"$allocsim" sweep --spec spec.txt --jobs 1 --json > stopped.json 2> stopped.err &
pid=$!
i=0
until grep -q '^sweep: 36 points' stopped.err; do
  i=$((i + 1))
  [ "$i" -le 1200 ] || { echo "the sweep did not announce its points in 60 s"; exit 1; }
  sleep 0.05
done
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || { echo "interrupted sweep exited $rc, expected 130"; exit 1; }
python3 - stopped.json <<'PY'
import json, sys
points = json.load(open(sys.argv[1]))["points"]
assert len(points) < 36, f"{len(points)} points printed after a stop"
for p in points:
    assert p["events"] > 0, f"point {p['point']} printed but never ran: {p}"
print(f"ok: {len(points)} points printed after SIGINT")
PY

# Kill -9 at random moments, 50 times, resuming each time.  After every
# kill the store must be consistent: SQLite's own checks pass, no sweep run
# lacks its point and no point names a missing run (a point is one
# transaction), and the sweep shows as interrupted.  A sweep that finishes
# between two kills is compared with the unsharded one and the next attempt
# starts a new store, until 50 kills were made.
consistent() {
  [ -f "$1" ] || return 0
  [ "$(sqlite3 "$1" 'PRAGMA integrity_check')" = ok ] \
    || { echo "$1: integrity_check failed after a kill"; return 1; }
  [ -z "$(sqlite3 "$1" 'PRAGMA foreign_key_check')" ] \
    || { echo "$1: foreign_key_check failed after a kill"; return 1; }
  [ "$(sqlite3 "$1" "SELECT count(*) FROM sqlite_master WHERE name = 'sweeps'")" -eq 1 ] \
    || return 0 # killed before the schema was made
  local half
  half="$(sqlite3 "$1" "SELECT
      (SELECT count(*) FROM run_meta WHERE key = 'sweep_id' AND run_id NOT IN
         (SELECT run_id FROM sweep_points WHERE run_id IS NOT NULL)) +
      (SELECT count(*) FROM sweep_points WHERE run_id IS NOT NULL AND run_id
         NOT IN (SELECT id FROM runs))")"
  [ "$half" -eq 0 ] || { echo "$1: $half half-written points after a kill"; return 1; }
  [ "$(sqlite3 "$1" 'SELECT count(*) FROM sweeps')" -eq 0 ] \
    || "$allocsim" sweep --status --db "$1" | grep -qE 'interrupted \(no process\)|complete' \
    || { echo "a killed sweep does not show as interrupted:"; "$allocsim" sweep --status --db "$1"; return 1; }
}
resumed_equal() {
  "$allocsim" sweep --status --db "$1" | tail -n +2 | grep -qv 'complete' \
    && { echo "after resuming, a sweep is not complete:"; "$allocsim" sweep --status --db "$1"; return 1; }
  digest "$1" > "$1.txt"
  diff -u whole.txt "$1.txt" || { echo "$1: killed and resumed sweep differs from the unsharded one"; return 1; }
}
kills=0 stores=1 attempts=0
store=killed1.db
while [ "$kills" -lt 50 ]; do
  attempts=$((attempts + 1))
  [ "$attempts" -le 400 ] || { echo "50 kills not reached in 400 attempts"; exit 1; }
  "$allocsim" sweep --spec spec.txt --db "$store" --resume --quiet > /dev/null &
  pid=$!
  sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null || true
  rc=0
  { wait "$pid"; } 2>/dev/null || rc=$?
  if [ "$rc" -eq 0 ]; then # finished before the kill
    resumed_equal "$store" || exit 1
    stores=$((stores + 1))
    store="killed$stores.db"
    continue
  fi
  [ "$rc" -eq 137 ] || { echo "sweep exited $rc"; exit 1; }
  kills=$((kills + 1))
  consistent "$store" || exit 1
done
"$allocsim" sweep --spec spec.txt --db "$store" --resume --quiet > /dev/null
resumed_equal "$store" || exit 1
echo "ok: 4 GNU parallel shards merged and sweeps killed $kills times (in $stores stores, each resumed to the end) equal the unsharded 36 points"

# The queries of docs/store.md.
cp -r "$src/data" data
run="$(sqlite3 data/reference.db "SELECT id FROM runs WHERE kind = 'measured'
        AND source LIKE '%survivors-s64-random-1e-3.trace'")"
"$allocsim" compare "$run" --db data/reference.db > /dev/null
python3 - "$src/docs/store.md" whole.db data/reference.db <<'PY'
import re, sqlite3, sys
doc, stores = sys.argv[1], sys.argv[2:]
queries = re.findall(r"^```sql\n(.*?)^```", open(doc).read(), re.M | re.S)
assert len(queries) >= 5, f"{doc}: {len(queries)} sql blocks, expected 5 or more"
for q in queries:
    rows = 0
    for store in stores:
        try:
            rows += len(sqlite3.connect(store).execute(q).fetchall())
        except sqlite3.Error as e:
            sys.exit(f"{doc}: query fails on {store}: {e}\n{q}")
    if rows == 0:
        sys.exit(f"{doc}: query returns no rows on {stores}:\n{q}")
print(f"ok: {len(queries)} queries of docs/store.md")
PY
