#!/usr/bin/env bash
# scripts/bench.sh -- the one source of allocsim's benchmark figures: fixed
# traces generated deterministically, replayed by every model and natively
# by the real allocators (allocsim oracle), medians of interleaved runs.
#   scripts/bench.sh [--json] [--runs N] [--real-runs N] [--quick]
#                    [--big] [--doc docs/benchmarks.md]
#                    [--save FILE.json] [--from FILE.json]
# docs/benchmarks.md is generated from it (see there); run on a Release build.
set -euo pipefail
cd "$(dirname "$0")/.."
exec nice python3 scripts/bench/bench.py "$@"
