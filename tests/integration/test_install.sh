#!/usr/bin/env bash
# tests/integration/test_install.sh -- installs allocsim into a temporary
# prefix with `cmake --install` and uses it from there as a user would:
# --version names the commit, a man page per subcommand and the bash
# completion are in place, and a capture run from the installed binary
# finds the installed preload library (not the build tree's) and writes a
# trace that the installed binary replays, and an oracle run finds the
# installed replayer.
#   usage: test_install.sh BUILD_DIR
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
bin=$prefix/bin/allocsim
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" --version | grep -Eq '^allocsim [0-9.]+ \(commit [0-9a-f]{7}' ||
  fail "--version does not name a commit: $("$bin" --version)"
for cmd in $("$bin" --help | awk '/^commands:/{on=1;next} on&&/^  /{print $1}'); do
  [ -s "$prefix/share/man/man1/allocsim-$cmd.1" ] || fail "no man page for $cmd"
done
[ -s "$prefix/share/man/man1/allocsim.1" ] || fail "no allocsim.1"
comp=$prefix/share/bash-completion/completions/allocsim
bash -n "$comp" || fail "completion script does not parse"
# The completion offers a subcommand's options.
out=$(bash -c "source '$comp'; COMP_WORDS=(allocsim replay --sett); COMP_CWORD=2; _allocsim; echo \${COMPREPLY[*]}")
[ "$out" = "--settle" ] || fail "completion of 'replay --sett' gave '$out'"
[ -f "$prefix/include/allocsim_mark.h" ] || fail "no allocsim_mark.h"

# A capture from the installed tree, with the build tree out of reach.
work=$prefix/work
mkdir -p "$work"
cd "$work"
if [ -x /usr/bin/python3 ]; then
  prog=(/usr/bin/python3 -c 'x = [bytes(100) for _ in range(1000)]')
else
  prog=(/bin/sh -c 'exit 0')
fi
env -u ALLOCSIM_CAPTURE_LIB "$bin" capture -o run.astrace -- "${prog[@]}" \
  >capture.out 2>&1 || fail "capture failed: $(cat capture.out)"
[ -s run.astrace ] || fail "no trace written"
grep -aq "capture_lib.*$prefix/lib[^/]*/allocsim/liballocsim_capture.so" run.astrace ||
  fail "capture did not use the installed library: $(grep -a capture_lib run.astrace | head -c 300)"
"$bin" replay run.astrace --model glibc >/dev/null || fail "replay of the capture failed"

# The oracle from the installed tree: its replayer from lib/allocsim.
env -u ALLOCSIM_REPLAYER "$bin" oracle run.astrace --sample-every 0 \
  >oracle.out 2>&1 || fail "oracle failed: $(cat oracle.out)"
grep -q "^replayer   $prefix/bin/../lib[^/]*/allocsim/allocsim-replayer" oracle.out ||
  fail "oracle did not use the installed replayer: $(grep replayer oracle.out)"
echo "install test passed: $prefix"
