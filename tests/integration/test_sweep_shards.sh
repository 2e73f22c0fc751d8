#!/usr/bin/env bash
# tests/integration/test_sweep_shards.sh ALLOCSIM SOURCE_DIR -- the GNU
# parallel recipe of docs/store.md run as documented (4 shards, then allocsim
# db merge), and a sweep killed with SIGKILL up to 50 times and resumed each
# time; both stores must equal the unsharded sweep point for point (key,
# kept bytes, formula, pinned arenas, model, page size).  Then every ```sql
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

# Kill -9 at random moments, resume each time.
kills=0
for attempt in $(seq 1 50); do
  "$allocsim" sweep --spec spec.txt --db killed.db --resume --quiet > /dev/null &
  pid=$!
  sleep "0.$((RANDOM % 6 + 1))"
  kill -9 "$pid" 2>/dev/null || true
  rc=0
  { wait "$pid"; } 2>/dev/null || rc=$?
  [ "$rc" -eq 0 ] && break # finished before the kill
  [ "$rc" -eq 137 ] || { echo "sweep exited $rc"; exit 1; }
  kills=$((kills + 1))
  # (killed before it stored its sweeps row, it has nothing to show; killed
  # between recording the sweep complete and exiting, it shows complete)
  [ "$(sqlite3 killed.db 'SELECT count(*) FROM sweeps' 2>/dev/null || echo 0)" -eq 0 ] \
    || "$allocsim" sweep --status --db killed.db | grep -qE 'interrupted \(no process\)|complete' \
    || { echo "a killed sweep does not show as interrupted:"; "$allocsim" sweep --status --db killed.db; exit 1; }
done
"$allocsim" sweep --spec spec.txt --db killed.db --resume --quiet > /dev/null
"$allocsim" sweep --status --db killed.db | tail -n +2 | grep -qv 'complete' \
  && { echo "after resuming, a sweep is not complete:"; "$allocsim" sweep --status --db killed.db; exit 1; }
digest killed.db > killed.txt
diff -u whole.txt killed.txt || { echo "killed and resumed sweep differs from the unsharded one"; exit 1; }
echo "ok: 4 GNU parallel shards merged and a sweep killed $kills times then resumed equal the unsharded 36 points"

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
