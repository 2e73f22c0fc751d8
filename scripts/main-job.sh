#!/usr/bin/env bash
# scripts/main-job.sh -- the README's first command: installs what is
# missing, builds, and runs the main job on the bundled data: the example
# trace against the models, the survivors study point, and predicted against
# measured RSS for every recorded run in the reference database.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh build
allocsim=build/sim/cli/allocsim

echo "== The bundled example trace against the ideal lower bound and glibc"
"$allocsim" replay data/example.trace --model ideal
echo
"$allocsim" replay data/example.trace --model glibc
echo
echo "== A few survivors pin pymalloc arenas (256 MiB of 64-byte objects, 1 in 10,000 kept)"
"$allocsim" run survivors --size 64 --fraction 0.0001 --seed 1
echo
"$allocsim" formula --size 64 --total 256 --fraction 0.0001
if [ -f data/reference.db ]; then
  echo
  echo "== Predicted against measured RSS for the recorded runs in data/reference.db"
  db=$(mktemp -d)/reference.db
  cp data/reference.db "$db"
  "$allocsim" runs --db "$db"
  measured=$("$allocsim" runs --db "$db" --json | python3 -c '
import json, sys
print(" ".join(str(r["id"]) for r in json.load(sys.stdin)["runs"] if r["kind"] == "measured"))')
  for run in $measured; do
    echo
    "$allocsim" compare "$run" --db "$db"
  done
fi
