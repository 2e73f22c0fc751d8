# tests/integration/sweep_fixture.sh -- sourced by the sharded-sweep tests:
# the spec they run (36 points) and the digest that must match point for
# point between stores.

# write_sweep_spec FILE: survivors, 4 fractions x 3 sizes x 3 seeds.
write_sweep_spec() {
  cat > "$1" <<'SPEC'
# survivors: 4 fractions x 3 sizes x 3 seeds = 36 points
workload = survivors
set total = 64
vary fraction = 1e-4,1e-3,1e-2,1e-1
vary size = 64,256,512
seeds = 3
SPEC
}

# digest STORE: every point's key and results, in key order.
digest() {
  sqlite3 "$1" "SELECT key, simulated_kept_bytes, formula_kept_bytes,
                       arenas_pinned, model, page_size
                FROM sweep_points ORDER BY key"
}
