# scripts/measure/distro_debs.sh -- sourced by the scripts that run a
# differential test on another distribution's libraries (glibc_differential.sh,
# tcmalloc_differential.sh, mimalloc_differential.sh): fetch a package, check
# it, unpack it, and link a test object so that it runs on the unpacked
# glibc and libraries.

# fetch_deb URL SHA256 WORK: downloads URL into WORK once, checks its sha256
# (as the distribution's Packages file lists it) and unpacks it into
# WORK/root.
fetch_deb() {
  deb=$3/$(basename "$1")
  if [ ! -f "$deb" ]; then
    curl -sSf -m 300 -o "$deb.part" "$1"
    mv "$deb.part" "$deb"
  fi
  echo "$2  $deb" | sha256sum -c --quiet -
  dpkg-deb -x "$deb" "$3/root"
}

# unpack_debs WORK LIST: a fresh WORK/root with every package of LIST
# fetched and unpacked (LIST: lines of URL then SHA256, alternating).
unpack_debs() {
  mkdir -p "$1"
  rm -rf "$1/root"
  echo "$2" | while read -r url && read -r sha; do
    fetch_deb "$url" "$sha" "$1"
  done
}

# unpacked_libdir WORK: where the unpacked packages keep their libraries.
unpacked_libdir() {
  lib=$1/root/usr/lib/x86_64-linux-gnu
  [ -e "$lib/ld-linux-x86-64.so.2" ] || lib=$1/root/lib/x86_64-linux-gnu
  echo "$lib"
}

# link_test BUILD NAME OUT LIBDIR: links tests/NAME's object of BUILD into
# OUT with LIBDIR's ld.so as its interpreter and the unpacked library
# directories (LIBDIR, and usr/lib beside a pre-usrmerge lib) first in its
# search path (DT_RPATH, so that libraries it loads, a preloaded one
# included, find them too).
link_test() {
  obj=$1/tests/CMakeFiles/$2.dir/validation/$2.c.o
  if [ ! -f "$obj" ]; then
    echo "$obj: no such file (build the test first)" >&2
    exit 2
  fi
  cc -O2 "$obj" -o "$3" \
    "$1/analysis/liballocsim_analysis.a" "$1/engine/liballocsim_engine.a" \
    "$1/models/liballocsim_models.a" "$1/traces/liballocsim_traces.a" \
    -lzstd -lz "$1/sim/liballocsim_core.a" -lgsl -lgslcblas -lsqlite3 -lm \
    -ldw -lelf -lcmocka \
    -Wl,--dynamic-linker="$4/ld-linux-x86-64.so.2" -Wl,--disable-new-dtags \
    -Wl,-rpath,"$4:${4%/lib/x86_64-linux-gnu}/usr/lib/x86_64-linux-gnu"
}

# build_on_debs BUILD WORK LIST NAME: unpack_debs WORK LIST, then link_test
# of NAME into WORK/NAME; lib is set to the unpacked glibc's directory.
build_on_debs() {
  unpack_debs "$2" "$3"
  lib=$(unpacked_libdir "$2")
  link_test "$1" "$4" "$2/$4" "$lib"
}
