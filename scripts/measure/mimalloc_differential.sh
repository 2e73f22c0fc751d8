#!/bin/sh
# scripts/measure/mimalloc_differential.sh -- the mimalloc model against
# Ubuntu 22.04's mimalloc 2.0.5, in Ubuntu's own userland.
#
# tests/validation/test_mimalloc_differential runs the 2.0.5 cases when
# ALLOCSIM_MIMALLOC_LIB_2_0_5 names that library.  This downloads Ubuntu
# 22.04's libmimalloc2.0 2.0.5+ds-2 and libc6 2.35-0ubuntu3.18
# (archive.ubuntu.com; each package's sha256 as the Packages file lists
# it), links the test against that glibc with its ld.so as the interpreter,
# and runs it (as root: the test reads /proc/self/pagemap's frame numbers).
#
#   scripts/measure/mimalloc_differential.sh [BUILD_DIR] [WORK_DIR]
#
# Needs curl and dpkg-deb, and a build of the test (BUILD_DIR, default
# build).  Exit status: the test's.
set -eu

ubuntu=http://archive.ubuntu.com/ubuntu/pool
debs="$ubuntu/universe/m/mimalloc/libmimalloc2.0_2.0.5+ds-2_amd64.deb
fd835942c62ffe6eee33481188e63b9e0f138ffb197d50bfd36916708f5debff
$ubuntu/main/g/glibc/libc6_2.35-0ubuntu3.18_amd64.deb
cbed4dfa159019c759edae73ece1af67817e163686ad8925a26c90849ba1660a"
build=${1:-build}
work=${2:-${TMPDIR:-/tmp}/allocsim-mimalloc-diff}/2.0.5
. "$(dirname "$0")/distro_debs.sh"
build_on_debs "$build" "$work" "$debs" test_mimalloc_differential
export ALLOCSIM_MIMALLOC_LIB_2_0_5="$work/root/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0"
exec "$work/test_mimalloc_differential"
