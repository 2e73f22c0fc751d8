#!/bin/sh
# tests/integration/test_lab.sh -- `allocsim lab` end to end: the JSON
# contracts of the list and of a lab (docs/course/instructor.md), --recorded
# beside the simulation, --measure running the lab program CMake built, and
# one-line usage errors with exit 2.
# Usage: test_lab.sh ALLOCSIM
set -eu
allocsim=$1
tmp=$(mktemp -d /tmp/allocsim-test-lab-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_lab: $*" >&2; exit 1; }

"$allocsim" lab --json > "$tmp/list.json"
python3 - "$tmp/list.json" <<'PY'
import json, sys
labs = json.load(open(sys.argv[1]))
names = [l["name"] for l in labs]
for want in ("sizes", "brk", "mmap-threshold", "arenas"):
    assert want in names, (want, names)
for l in labs:
    assert isinstance(l["title"], str) and l["title"], l
    assert l["models"] and all(isinstance(m, str) for m in l["models"]), l
PY

for lab in $("$allocsim" lab --json | python3 -c \
             'import json,sys; print(" ".join(l["name"] for l in json.load(sys.stdin)))'); do
  "$allocsim" lab "$lab" --json --recorded > "$tmp/$lab.json" ||
    fail "lab $lab --json --recorded failed"
  python3 - "$tmp/$lab.json" "$lab" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["name"] == sys.argv[2], d["name"]
assert d["question"].endswith("?") or "?" in d["question"], d["question"]
assert d["steps"], "no steps"
measured = 0
for s in d["steps"]:
    assert s["label"] and s["simulated_rss_bytes"] > 0, s
    if "measured_rss_bytes" in s:
        measured += 1
        # the repository's runs are predicted within 1.25 MiB (the largest,
        # stated miss; tests/validation/test_course_labs.c has each lab's),
        # but for jemalloc's decay at 1000 and 10000 ms, whose timing the
        # real clock decides (printed, not asserted: that test's header)
        if s["label"].startswith(("jemalloc, dirty_decay_ms=1000:",
                                  "jemalloc, dirty_decay_ms=10000:")):
            continue
        assert abs(s["predicted_rss_bytes"] - s["measured_rss_bytes"]) <= 1280 << 10, s
assert measured > 0, "no recorded measurement attached"
PY
  # Every column of the step table has its own name: two models' counters
  # of one name (decay's mimalloc.purges and jemalloc.purges) keep their
  # model, or a reader cannot tell the columns apart.
  "$allocsim" lab "$lab" --recorded --no-map > "$tmp/$lab.txt" ||
    fail "lab $lab --recorded failed"
  python3 - "$tmp/$lab.txt" "$lab" <<'PY'
import sys
head = next(l for l in open(sys.argv[1]) if l.startswith("step "))
names = [w for w in head.split() if w not in ("MiB", "KiB", "meas")]
dup = sorted({w for w in names if names.count(w) > 1})
assert not dup, (sys.argv[2], "columns named twice", dup, head)
PY
done

# --measure runs the real program (built into labs/ beside the binary's
# build tree); the brk lab is quick and exact on glibc.
labs_dir=$(dirname "$(dirname "$allocsim")")/labs
if [ -x "$labs_dir/lab_brk" ]; then
  ALLOCSIM_LABS_DIR=$labs_dir "$allocsim" lab brk --measure --json \
    > "$tmp/brk-measured.json" 2>/dev/null || fail "lab brk --measure failed"
  python3 - "$tmp/brk-measured.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["steps"]:
    assert "measured_rss_bytes" in s, s
    assert abs(s["predicted_rss_bytes"] - s["measured_rss_bytes"]) <= 64 << 10, s
PY
fi

# Usage errors: one line, exit 2.
for args in "no-such-lab" "brk --bogus" "brk --measure --recorded" \
            "brk arenas" "brk --repeat 0"; do
  set +e
  # shellcheck disable=SC2086
  "$allocsim" lab $args > "$tmp/out" 2> "$tmp/err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "lab $args: exit $rc, expected 2"
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "lab $args: stderr not one line"
done
echo "test_lab: ok"
