#!/usr/bin/env bash
# scripts/main-job.sh -- the README's first command: installs what is
# missing, builds, and runs the main job on the bundled data: the example
# trace against the models, the survivors study point, and predicted against
# measured RSS for every recorded run in the reference database.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh build
allocsim=build/cli/allocsim

echo "== The bundled example trace against the ideal lower bound and glibc"
"$allocsim" replay data/example.trace --model ideal
echo
"$allocsim" replay data/example.trace --model glibc
echo
echo "== A few survivors pin pymalloc arenas (256 MiB of 64-byte objects, 1 in 10,000 kept)"
"$allocsim" run survivors --size 64 --fraction 0.0001 --seed 1
echo
"$allocsim" formula --size 64 --total 256 --fraction 0.0001
echo
echo "== Predicted against measured RSS for every recorded run in data/reference.db"
python3 scripts/compare_all.py "$allocsim" data/reference.db
