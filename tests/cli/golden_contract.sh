#!/usr/bin/env bash
# The numbers of every shipped scenario, exactly as `tpsim run` prints them, against
# tests/golden/: a change to any result shows up here and must be made on purpose
# (tools/update_golden rewrites the files; the commit says why the numbers moved).
set -u
tpsim="$1"
root="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
for scenario in "$root"/scenarios/*.json; do
  name="$(basename "$scenario" .json)"
  case "$name" in sweep_*) continue ;; esac
  golden="$root/tests/golden/$name.txt"
  if [ ! -e "$golden" ]; then
    echo "FAIL $name: no golden file (run tools/update_golden)"; fails=$((fails+1)); continue
  fi
  "$tpsim" run "$scenario" > "$work/$name.txt" 2> /dev/null || { echo "FAIL $name: run failed"; fails=$((fails+1)); continue; }
  if cmp -s "$golden" "$work/$name.txt"; then
    echo "ok $name"
  else
    echo "FAIL $name differs from its golden result:"; diff "$golden" "$work/$name.txt"; fails=$((fails+1))
  fi
done
for golden in "$root"/tests/golden/*.txt; do
  [ -e "$root/scenarios/$(basename "$golden" .txt).json" ] || { echo "FAIL $(basename "$golden"): no such scenario"; fails=$((fails+1)); }
done
[ $fails = 0 ] || echo "if the change is intended: tools/update_golden, and say in the commit why the numbers moved"
echo "golden contract: $fails failed"
[ $fails = 0 ]
