#!/usr/bin/env bash
# scripts/test.sh -- builds (installing packages if missing) and runs the
# whole test suite: unit, integration and validation tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${ALLOCSIM_BUILD_DIR:-build}"
./scripts/build.sh "$build_dir" "$@"
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)"
