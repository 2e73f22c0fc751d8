#!/usr/bin/env bash
# scripts/build.sh -- installs the system packages allocsim needs (Debian 12)
# if any is missing, then configures and builds into build/ (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(build-essential cmake pkg-config libgsl-dev libsqlite3-dev libcmocka-dev python3
  gnuplot-nox chromium sqlite3 parallel slurm-wlm munge libzstd-dev
  zlib1g-dev libunwind-dev libdw-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi
build_dir="${1:-build}"
shift || true
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >&2
cmake --build "$build_dir" -j"$(nproc)" >&2
