#!/usr/bin/env bash
# scripts/measure/cost/cost_model.sh -- measures the virtual-time cost model
# (sim/cost.c) on this machine: builds cost_model.c with the system cc,
# runs it and cost_model_py.py under Debian's python3, and prints the
# constants with the machine they were measured on.  Paste the figures into
# sim/cost.c's table (each row names this script).
#   usage: scripts/measure/cost/cost_model.sh [PYTHON]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${1:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/cost_model" "$here/cost_model.c"
echo "# $(uname -n) $(uname -m) $(nproc) cpus, kernel $(uname -r)," \
     "$(ldd --version | head -1 | sed 's/.* //') glibc," \
     "$("$python" -c 'import platform; print("CPython", platform.python_version())')," \
     "$(date -u +%Y-%m-%d)"
"$tmp/cost_model"
"$python" "$here/cost_model_py.py"
