#!/bin/sh
# scripts/measure/glibc_differential.sh -- the glibc model against another
# glibc than the machine's, call for call.
#
# tests/validation/test_glibc_differential runs the model as the version of
# the glibc it runs on.  This links the same test object against another
# distribution's glibc, with that glibc's ld.so as the interpreter, so that
# the test and the child it re-executes both run on it, and runs it:
#   2.41  Debian 13:    libc6 2.41-12+deb13u5 (deb.debian.org)
#   2.39  Ubuntu 24.04: libc6 2.39-0ubuntu8.12 (archive.ubuntu.com)
#   2.35  Ubuntu 22.04: libc6 2.35-0ubuntu3.18 (archive.ubuntu.com)
# each package's sha256 as its distribution's Packages file lists it.
#
#   scripts/measure/glibc_differential.sh [--glibc 2.41|2.39|2.35] [BUILD_DIR]
#                                         [WORK_DIR]
#
# Needs curl and dpkg-deb, and a build of the test (BUILD_DIR, default
# build).  Exit status: the test's.
set -eu

glibc=2.41
if [ "${1:-}" = --glibc ]; then
  glibc=${2:?--glibc needs a version}
  shift 2
fi
case $glibc in
  2.41)
    deb=libc6_2.41-12+deb13u5_amd64.deb
    sha=b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf
    url=http://deb.debian.org/debian/pool/main/g/glibc/$deb ;;
  2.39)
    deb=libc6_2.39-0ubuntu8.12_amd64.deb
    sha=d821b41fc59cb4978ecd53bc83e5c964ac15d305c8d2ac4c8a35aebe55010fb9
    url=http://archive.ubuntu.com/ubuntu/pool/main/g/glibc/$deb ;;
  2.35)
    deb=libc6_2.35-0ubuntu3.18_amd64.deb
    sha=cbed4dfa159019c759edae73ece1af67817e163686ad8925a26c90849ba1660a
    url=http://archive.ubuntu.com/ubuntu/pool/main/g/glibc/$deb ;;
  *)
    echo "glibc_differential.sh: --glibc $glibc: expected 2.41, 2.39 or 2.35" >&2
    exit 2 ;;
esac
build=${1:-build}
work=${2:-${TMPDIR:-/tmp}/allocsim-glibc-diff}/$glibc
mkdir -p "$work"
if [ ! -f "$work/$deb" ]; then
  curl -sSf -m 300 -o "$work/$deb.part" "$url"
  mv "$work/$deb.part" "$work/$deb"
fi
echo "$sha  $work/$deb" | sha256sum -c --quiet -
rm -rf "$work/root"
dpkg-deb -x "$work/$deb" "$work/root"
lib=$work/root/usr/lib/x86_64-linux-gnu
[ -e "$lib/ld-linux-x86-64.so.2" ] || lib=$work/root/lib/x86_64-linux-gnu # 2.35

tests=$build/tests
obj=$tests/CMakeFiles/test_glibc_differential.dir/validation/test_glibc_differential.c.o
if [ ! -f "$obj" ]; then
  echo "glibc_differential.sh: $obj: no such file (build the test first)" >&2
  exit 2
fi
cc -O2 "$obj" -o "$work/test_glibc_differential" \
  "$build/analysis/liballocsim_analysis.a" "$build/engine/liballocsim_engine.a" \
  "$build/models/liballocsim_models.a" "$build/traces/liballocsim_traces.a" \
  -lzstd -lz "$build/sim/liballocsim_core.a" -lgsl -lgslcblas -lsqlite3 -lm \
  -ldw -lelf -lcmocka \
  -Wl,--dynamic-linker="$lib/ld-linux-x86-64.so.2" -Wl,--disable-new-dtags \
  -Wl,-rpath,"$lib"
exec "$work/test_glibc_differential"
