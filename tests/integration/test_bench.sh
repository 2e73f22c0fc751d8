#!/usr/bin/env bash
# tests/integration/test_bench.sh BUILD_DIR -- scripts/bench.sh end to end
# on its small traces (--quick, one round): the JSON has the shape issue 15
# asks for, every model replays every trace it accepts with the same event
# count and the simulated peak `allocsim replay` gives, the real allocators
# report their calls' CPU time, and --from rewrites the page from the JSON.
# No figure is checked against a time: timings live in docs/benchmarks.md.
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/allocsim-test-bench-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$root/scripts/bench.sh" --quick --runs 1 --json --dir "$dir" \
  --allocsim "$build/cli/allocsim" > "$dir/bench.json"
python3 - "$dir/bench.json" "$build/cli/allocsim" <<'PY'
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
keys = {"trace", "model", "events", "events_per_s", "ns_per_event",
        "sim_max_rss_bytes", "simulated_peak_rss_bytes", "real_ns_per_event"}
assert set(d) >= {"machine", "cases"}, d.keys()
traces = {c["trace"] for c in d["cases"]}
assert traces == {"survivors", "spike", "churn", "synthetic"}, traces
ok = [c for c in d["cases"] if "error" not in c]
assert {c["model"] for c in ok} >= {"ideal", "glibc", "cpython"}
for c in ok:
    assert keys <= set(c), (c, keys - set(c))
    assert c["events_per_s"] > 0 and c["sim_max_rss_bytes"] > 0, c
    # the kernel's share of the CPU time, reported apart
    assert 0 <= c["sys_ns_per_event"] <= c["ns_per_event"], c
    same = [o["events"] for o in ok if o["trace"] == c["trace"]]
    assert len(set(same)) == 1, (c["trace"], same)
    if c["model"] == "glibc":
        assert c["real_ns_per_event"] > 0, c
    if c["model"] == "ideal":
        assert c["real_ns_per_event"] is None, c
# The simulated peak is the replay's own figure (one layout, as measured).
churn = [c for c in ok if c["trace"] == "churn" and c["model"] == "glibc"][0]
t = [t for t in d["traces"] if t["trace"] == "churn"][0]
path = sys.argv[1].rsplit("/", 1)[0] + "/churn-quick.astrace"
out = subprocess.run([sys.argv[2], "replay", path, "--model", "glibc",
                      "--layouts", "1", "--json"],
                     capture_output=True, check=True, text=True)
assert json.loads(out.stdout)["peak_rss_bytes"] == churn["simulated_peak_rss_bytes"]
# Models that refuse a trace are listed, not dropped silently.
assert all(c["error"] for c in d["cases"] if "error" in c)
PY
"$root/scripts/bench.sh" --from "$dir/bench.json" --doc "$dir/bench.md"
grep -q '^| churn | glibc | ' "$dir/bench.md"
grep -q '^## Against the targets' "$dir/bench.md"
echo "test_bench: ok"
