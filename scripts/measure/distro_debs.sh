# scripts/measure/distro_debs.sh -- sourced by the scripts that run a
# differential test on another distribution's libraries (glibc_differential.sh,
# tcmalloc_differential.sh): fetch a package, check it, unpack it, and link a
# test object so that it runs on the unpacked glibc and libraries.

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

# unpacked_libdir WORK: where the unpacked packages keep their libraries.
unpacked_libdir() {
  lib=$1/root/usr/lib/x86_64-linux-gnu
  [ -e "$lib/ld-linux-x86-64.so.2" ] || lib=$1/root/lib/x86_64-linux-gnu
  echo "$lib"
}

# link_test BUILD NAME OUT LIBDIR: links tests/NAME's object of BUILD into
# OUT with LIBDIR's ld.so as its interpreter and LIBDIR first in its search
# path (DT_RPATH, so that libraries it loads, a preloaded one included, find
# LIBDIR's too).
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
    -Wl,-rpath,"$4"
}
