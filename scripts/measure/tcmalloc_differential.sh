#!/bin/sh
# scripts/measure/tcmalloc_differential.sh -- the tcmalloc model against
# another distribution's gperftools, in that distribution's own userland.
#
# tests/validation/test_tcmalloc_differential runs the model against
# Debian 12's libtcmalloc_minimal (2.10) and, when ALLOCSIM_TCMALLOC_215_LIB
# or ALLOCSIM_TCMALLOC_216_LIB names a library, against that release.  What
# runs before main() (libstdc++'s emergency pool, tcmalloc's own start-up)
# depends on the libstdc++ and glibc beside the allocator, so this links the
# test against the distribution's glibc, libstdc++ and libgcc as well, with
# its ld.so as the interpreter, and preloads its tcmalloc:
#   2.16  Debian 13:    libtcmalloc-minimal4t64 2.16-1, libstdc++6 and
#                       libgcc-s1 14.2.0-19, libc6 2.41-12+deb13u5
#                       (deb.debian.org)
#   2.15  Ubuntu 24.04: libtcmalloc-minimal4t64 2.15-3build1, libstdc++6 and
#                       libgcc-s1 14.2.0-4ubuntu2~24.04.1, libc6
#                       2.39-0ubuntu8.12 (archive.ubuntu.com)
#   2.9   Ubuntu 22.04: libtcmalloc-minimal4 2.9.1-0ubuntu3, libstdc++6 and
#                       libgcc-s1 12.3.0-1ubuntu1~22.04.3, libc6
#                       2.35-0ubuntu3.18 (archive.ubuntu.com)
# each package's sha256 as its distribution's Packages file lists it.
#
#   scripts/measure/tcmalloc_differential.sh [--release 2.16|2.15|2.9]
#                                            [BUILD_DIR] [WORK_DIR]
#
# Needs curl and dpkg-deb, and a build of the test (BUILD_DIR, default
# build).  Exit status: the test's.
set -eu

release=2.16
if [ "${1:-}" = --release ]; then
  release=${2:?--release needs a version}
  shift 2
fi
deb13=http://deb.debian.org/debian/pool/main
ubuntu=http://archive.ubuntu.com/ubuntu/pool/main
case $release in
  2.16)
    var=ALLOCSIM_TCMALLOC_216_LIB
    debs="$deb13/g/google-perftools/libtcmalloc-minimal4t64_2.16-1_amd64.deb
98fcefd2ae81bf1c332b84829e84b994b34b58f339416166b40682030d4a44e0
$deb13/g/gcc-14/libstdc++6_14.2.0-19_amd64.deb
ab1fa05837aa7a92aae748fd07a18a35f7d18bb4a71c4724fe2bbf0e32089de0
$deb13/g/gcc-14/libgcc-s1_14.2.0-19_amd64.deb
3c71917b490d1a17aed43196a2787a256ecf060526cdb20216a74bedc061b150
$deb13/g/glibc/libc6_2.41-12+deb13u5_amd64.deb
b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf" ;;
  2.15)
    var=ALLOCSIM_TCMALLOC_215_LIB
    debs="$ubuntu/g/google-perftools/libtcmalloc-minimal4t64_2.15-3build1_amd64.deb
f4ebba418cc336c07d82f9e3b89b2abe570637cf321d2f899e4ec718f86447ca
$ubuntu/g/gcc-14/libstdc++6_14.2.0-4ubuntu2~24.04.1_amd64.deb
a51f8de7829211db961a31f02158058ad1a95f92ac6d0a5dff6350e2821c54c0
$ubuntu/g/gcc-14/libgcc-s1_14.2.0-4ubuntu2~24.04.1_amd64.deb
aa7fadbe33b78bcf99885318040601c550c208929565b179891d9a3cc2aa68cd
$ubuntu/g/glibc/libc6_2.39-0ubuntu8.12_amd64.deb
d821b41fc59cb4978ecd53bc83e5c964ac15d305c8d2ac4c8a35aebe55010fb9" ;;
  2.9)
    var=ALLOCSIM_TCMALLOC_29_LIB
    debs="$ubuntu/g/google-perftools/libtcmalloc-minimal4_2.9.1-0ubuntu3_amd64.deb
f0953cb215ed943429951920f5b88b4c29a6ef0503207ddc4c724772538f06af
$ubuntu/g/gcc-12/libstdc++6_12.3.0-1ubuntu1~22.04.3_amd64.deb
29ef3d289b272704b75141906c8f683db0f2bdb0942061366691333bfb289bdc
$ubuntu/g/gcc-12/libgcc-s1_12.3.0-1ubuntu1~22.04.3_amd64.deb
d383e642d83263147f7b4b69fb92cf1036e5246c6be3accf10b77f986684589a
$ubuntu/g/glibc/libc6_2.35-0ubuntu3.18_amd64.deb
cbed4dfa159019c759edae73ece1af67817e163686ad8925a26c90849ba1660a" ;;
  *)
    echo "tcmalloc_differential.sh: --release $release: expected 2.16, 2.15 or 2.9" >&2
    exit 2 ;;
esac
build=${1:-build}
work=${2:-${TMPDIR:-/tmp}/allocsim-tcmalloc-diff}/$release
. "$(dirname "$0")/distro_debs.sh"
build_on_debs "$build" "$work" "$debs" test_tcmalloc_differential
# Only this release: Debian 12's library would run on the wrong userland.
export ALLOCSIM_TCMALLOC_LIB=/nonexistent \
  "$var=$work/root/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
exec "$work/test_tcmalloc_differential"
