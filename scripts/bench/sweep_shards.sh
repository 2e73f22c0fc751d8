#!/usr/bin/env bash
# scripts/bench/sweep_shards.sh [ALLOCSIM] -- the sharding target of the
# sweep work: a 1,000-point sweep (10 fractions x 5 sizes x 2 page sizes x
# 10 seeds of survivors) run unsharded on all cores, then as 8 shards under
# GNU parallel (one process per core at a time, --jobs 1 each) and merged.
# Prints both wall times, the sharded overhead per core, and whether the
# merged store equals the unsharded one point for point.
# Target: sharded within 10 % of unsharded; stores identical.
set -euo pipefail
allocsim="$(realpath "${1:-build/cli/allocsim}")"
work="$(mktemp -d /tmp/allocsim-bench-shards.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work"
cores="$(nproc)"
cat > bench.spec <<'SPEC'
workload = survivors
set total = 16
vary fraction = 1e-5,3e-5,1e-4,3e-4,1e-3,3e-3,1e-2,3e-2,1e-1,3e-1
vary size = 64,128,256,384,512
vary page_size = 4096,16384
seeds = 10
SPEC
now() { date +%s.%N; }
t0="$(now)"
"$allocsim" sweep --spec bench.spec --db whole.db --quiet --jobs "$cores" > /dev/null
t1="$(now)"
parallel -j "$cores" "$allocsim" sweep --spec bench.spec --shard {}/8 --jobs 1 \
  --db part{}.db --quiet '>' /dev/null ::: 0 1 2 3 4 5 6 7
"$allocsim" db merge merged.db part*.db > /dev/null
t2="$(now)"
points="$(sqlite3 whole.db 'SELECT count(*) FROM sweep_points')"
digest() {
  sqlite3 "$1" "SELECT key, simulated_kept_bytes, formula_kept_bytes,
                       arenas_pinned, model, page_size
                FROM sweep_points ORDER BY key" | sha256sum | cut -c1-16
}
same=no
[ "$(digest whole.db)" = "$(digest merged.db)" ] && same=yes
python3 - "$t0" "$t1" "$t2" "$cores" "$points" "$same" <<'PY'
import sys
t0, t1, t2 = map(float, sys.argv[1:4])
cores, points, same = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
whole, sharded = t1 - t0, t2 - t1
over = 100 * (sharded / whole - 1)
print(f"points {points}, cores {cores}")
print(f"unsharded (--jobs {cores})          {whole:7.2f} s")
print(f"8 shards under parallel, merged  {sharded:7.2f} s  ({over:+.1f} %, target <= +10 %)")
print(f"merged store equals unsharded    {same}")
sys.exit(0 if same == "yes" else 1)
PY
