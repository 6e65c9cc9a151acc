#!/usr/bin/env bash
# An installed tpsim from outside: cmake --install into a scratch prefix, then the
# installed binary finds its models and scenarios under share/tpsim without the
# source tree's help; cpack makes a .deb whose dependencies are Debian packages.
set -u
build="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
pass() { echo "ok $1"; }
fail() { echo "FAIL $1"; fails=$((fails+1)); }

cmake --install "$build" --prefix "$work/prefix" > /dev/null || fail "cmake --install"
tpsim="$work/prefix/bin/tpsim"
"$tpsim" --version | grep -qF "(models: $work/prefix/share/tpsim/models)" && pass "installed tpsim uses its own share/tpsim/models" \
  || fail "installed models dir: $("$tpsim" --version)"
(cd "$work" && "$tpsim" run "$work/prefix/share/tpsim/scenarios/quickstart.json" | grep -q "async_tp") && pass "installed scenario runs" \
  || fail "installed quickstart"
[ "$("$tpsim" hardware list | wc -l)" -gt 5 ] && pass "hardware list from the install" || fail "hardware list"
mkdir -p "$work/empty"
TPSIM_MODELS_DIR="$work/empty" "$tpsim" hardware list > /dev/null 2> "$work/err"; rc=$?
[ $rc = 2 ] && grep -q "no hardware models in" "$work/err" && pass "no models: hardware list fails loudly" || fail "empty models dir: exit $rc"

if command -v dpkg-deb > /dev/null; then
  (cd "$build" && cpack -G DEB -B "$work/deb" > /dev/null 2>&1) || fail "cpack"
  deb=$(ls "$work"/deb/tpsim_*.deb 2> /dev/null | head -1)
  if [ -n "$deb" ] && dpkg-deb -I "$deb" | grep -q "Depends:.*libfmt" && ! dpkg-deb -I "$deb" | grep -qi "cuda\|nccl" \
     && dpkg-deb -c "$deb" | grep -q "share/tpsim/models/h100_sxm.json"; then pass "the .deb depends on Debian packages only and ships the models"
  else fail "the .deb: $deb"; fi
else
  echo "skip: no dpkg-deb here"
fi
echo "install contract: $fails failed"
[ $fails = 0 ]
