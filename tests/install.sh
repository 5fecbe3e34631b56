#!/usr/bin/env bash
# The installed flatkv, as a user gets it: `cmake --install` into a fresh prefix (default), or with --deb the .deb
# that CPack builds, installed into the system with dpkg and purged at the end (root; .ci/run runs it).
#
# usage: install.sh [--deb] BUILD_DIR DATA_DIR
#   Checks, on the installed files only: `flatkv --version` is the build's; libflatkv.so (with its SONAME) and
#   libflatkv.a define no global symbol but the fkv_ API; a program built with `pkg-config --cflags --libs flatkv`
#   against the shared library, and one against the static library (beside functions named like flatkv's
#   internals, which must not clash), generate the same greedy ids as the build tree's command; so does the
#   installed command. With --deb, also the unit file and the package's dependencies.
set -euo pipefail
deb=0
if [ "${1:-}" = --deb ]; then deb=1; shift; fi
build=$(cd "$1" && pwd) data=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
package=flatkv
cleanup() {
  # Purged only when this run installed it (a package there before is not ours to remove).
  if [ "$deb" = 1 ] && [ -n "${installed_here:-}" ]; then dpkg --purge "$package" >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok   $*"; }

if [ "$deb" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || fail "--deb installs into the system: run it as root"
  if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    fail "a $package package is already installed (dpkg -r $package first): this test would replace it"
  fi
  (cd "$build" && cpack -G DEB -B "$work/deb" >/dev/null)
  file=$(ls "$work"/deb/*.deb)
  depends=$(dpkg-deb -f "$file" Depends)
  for lib in libjansson4 libxxhash0 libmicrohttpd12 libpcre2-8-0 libsodium23 libgomp1; do
    [[ "$depends" == *"$lib"* ]] || fail "the package does not depend on $lib (Depends: $depends)"
  done
  ok "$(basename "$file") depends on $depends"
  installed_here=1
  dpkg -i "$file" >/dev/null
  prefix=/usr
  unit=/lib/systemd/system/flatkv.service
  [ -f "$unit" ] || fail "the unit is not in /lib/systemd/system"
  if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
    ok "the unit is installed, not enabled, and systemd-analyze verify accepts it"
  else
    ok "the unit is installed, not enabled (no systemd-analyze here to verify it)"
  fi
else
  prefix=$work/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
fi
libdir=$(dirname "$(find "$prefix" -name libflatkv.a -path '*/lib*' | head -1)")
[ -n "$libdir" ] || fail "no libflatkv.a under $prefix"
export PKG_CONFIG_PATH=$libdir/pkgconfig

# The version.
want=$("$build/flatkv" --version)
got=$("$prefix/bin/flatkv" --version)
[ "$got" = "$want" ] || fail "installed --version '$got', the build's '$want'"
ok "$prefix/bin/flatkv --version: $got"

# The exports: the fkv_ API alone.
soname=$(readelf -d "$libdir/libflatkv.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ -e "$libdir/$soname" ] || fail "libflatkv.so's SONAME '$soname' is not installed"
others=$(nm -D --defined-only "$libdir/libflatkv.so" | awk '$3 !~ /^fkv_/ {print $3}')
[ -z "$others" ] || fail "libflatkv.so exports more than the fkv_ API: $(echo $others | head -c 400)"
others=$(nm -g --defined-only "$libdir/libflatkv.a" | awk 'NF == 3 && $3 !~ /^fkv_/ {print $3}')
[ -z "$others" ] || fail "libflatkv.a defines global symbols beyond the fkv_ API: $(echo $others | head -c 400)"
n_api=$(nm -D --defined-only "$libdir/libflatkv.so" | wc -l)
ok "libflatkv.so ($soname) and libflatkv.a define $n_api global symbols, every one fkv_"

# Programs built against the installed files; greedy ids compared with the build tree's command.
model=$data/models/stories260K.gguf prompt="Once upon a time" n=48
# The ids of `flatkv generate --json` ("tokens":[...]), space-separated.
ids_of() {
  "$1" generate -m "$model" -p "$prompt" -n $n --temp 0 --json | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/; s/,/ /g'
}
want=$(ids_of "$build/flatkv")
# -Wl,-rpath: a prefix outside the loader's path (none is needed under /usr).
cc -std=c11 -Wall -Wextra -Werror "$here/install/generate.c" -o "$work/generate-shared" \
  $(pkg-config --cflags --libs flatkv) -Wl,-rpath,"$libdir"
[[ "$(ldd "$work/generate-shared")" == *libflatkv.so* ]] || fail "the pkg-config program does not link libflatkv.so"
got=$("$work/generate-shared" "$model" "$prompt" $n)
[ "$got" = "$want" ] || fail "the program on libflatkv.so generated '$got', the build's command '$want'"
ok "a program built with pkg-config --libs flatkv (shared) generates the command's $n ids"
# Names the library uses inside (gguf_open, tok_load, kern_best) are the program's own here: they must not clash.
printf 'int gguf_open(void) { return 1; }\nint tok_load(void) { return 2; }\nint kern_best(void) { return 3; }\n' \
  > "$work/clash.c"
cc -std=c11 -Wall -Wextra -Werror "$here/install/generate.c" "$work/clash.c" -o "$work/generate-static" \
  $(pkg-config --cflags flatkv) "$libdir/libflatkv.a" $(pkg-config --static --libs flatkv | sed 's/-lflatkv\b//')
[[ "$(ldd "$work/generate-static")" != *libflatkv.so* ]] || fail "the static program links libflatkv.so"
got=$("$work/generate-static" "$model" "$prompt" $n)
[ "$got" = "$want" ] || fail "the program on libflatkv.a generated '$got', the build's command '$want'"
ok "a program on libflatkv.a (pkg-config --static) with its own gguf_open, tok_load, kern_best generates the same"
got=$(ids_of "$prefix/bin/flatkv")
[ "$got" = "$want" ] || fail "the installed command generated '$got', the build's '$want'"
ok "the installed command generates the same $n ids"

if [ "$deb" = 1 ]; then
  dpkg --purge "$package" >/dev/null
  installed_here=
  left=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [ -z "$left" ] || [[ "$left" == *not-installed ]] || fail "dpkg still knows $package after the purge: $left"
  for f in /usr/bin/flatkv /usr/include/flatkv.h /usr/lib/libflatkv.so /usr/lib/pkgconfig/flatkv.pc "$unit"; do
    [ ! -e "$f" ] || fail "the purge left $f behind"
  done
  ok "dpkg --purge $package removed it and every file"
fi
