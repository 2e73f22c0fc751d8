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
    sha=b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf
    url=http://deb.debian.org/debian/pool/main/g/glibc/libc6_2.41-12+deb13u5_amd64.deb ;;
  2.39)
    sha=d821b41fc59cb4978ecd53bc83e5c964ac15d305c8d2ac4c8a35aebe55010fb9
    url=http://archive.ubuntu.com/ubuntu/pool/main/g/glibc/libc6_2.39-0ubuntu8.12_amd64.deb ;;
  2.35)
    sha=cbed4dfa159019c759edae73ece1af67817e163686ad8925a26c90849ba1660a
    url=http://archive.ubuntu.com/ubuntu/pool/main/g/glibc/libc6_2.35-0ubuntu3.18_amd64.deb ;;
  *)
    echo "glibc_differential.sh: --glibc $glibc: expected 2.41, 2.39 or 2.35" >&2
    exit 2 ;;
esac
build=${1:-build}
work=${2:-${TMPDIR:-/tmp}/allocsim-glibc-diff}/$glibc
. "$(dirname "$0")/distro_debs.sh"
build_on_debs "$build" "$work" "$url
$sha" test_glibc_differential
exec "$work/test_glibc_differential"
