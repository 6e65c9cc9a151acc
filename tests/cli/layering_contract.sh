#!/usr/bin/env bash
# The modules under include/tpsim and src are layers: a module may include its own
# headers and those of layers below it, never above (no include cycles between modules).
set -u
root="$1"
layers=(core hw cost dag workload runtime analysis strategies step io app report calibration cuda sweep cli cuda_backend)
index_of() {
  local i
  for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
fails=0
for base in "$root/include/tpsim" "$root/src"; do
  for dir in "$base"/*/; do
    module="$(basename "$dir")"
    mine="$(index_of "$module")"
    if [ "$mine" = -1 ]; then echo "FAIL $module: not in the layer list of $0"; fails=$((fails+1)); continue; fi
    while IFS=: read -r file line; do
      used="$(sed -E 's#.*"tpsim/([a-z_]+)/.*#\1#' <<<"$line")"
      theirs="$(index_of "$used")"
      if [ "$theirs" = -1 ] || [ "$theirs" -gt "$mine" ]; then
        echo "FAIL ${file#$root/}: $module includes $used (a higher layer): $line"; fails=$((fails+1))
      fi
    done < <(grep -rHo '#include "tpsim/[a-z_]*/[^"]*"' "$dir" 2>/dev/null)
  done
done
echo "layering contract: $fails failed"
[ $fails = 0 ]
