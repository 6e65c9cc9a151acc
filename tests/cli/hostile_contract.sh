#!/usr/bin/env bash
# Outputs under hostile conditions: a full disk (a tiny tmpfs where the machine
# lets us mount one, /dev/full otherwise) is exit 1 with one line saying what was
# kept; no half-written file is left; a sweep keeps its whole points and marker.
set -u
tpsim="$1"
root="$2"
work="$(mktemp -d)"
full="$work/full"
mkdir -p "$full"
mounted=0
cleanup() { [ $mounted = 1 ] && umount "$full"; rm -rf "$work"; }
trap cleanup EXIT
fails=0
pass() { echo "ok $1"; }
fail() { echo "FAIL $1"; fails=$((fails+1)); }

"$tpsim" run "$root/scenarios/quickstart.json" --json /dev/full > /dev/null 2> "$work/err"; rc=$?
[ $rc = 1 ] && grep -q "No space left on device" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ] && pass "--json /dev/full: exit 1, one line" \
  || { fail "--json /dev/full: exit $rc"; cat "$work/err"; }

# Two sweeps on one CSV: the second is refused while the first holds it, and writes nothing.
cat > "$work/small_sweep.json" <<JSON
{ "base": "$root/scenarios/quickstart.json", "axes": { "workload.n": [1024, 2048] } }
JSON
if command -v flock > /dev/null; then
  : > "$work/busy.csv"
  flock "$work/busy.csv" sleep 2 &
  holder=$!
  sleep 0.5
  "$tpsim" sweep "$work/small_sweep.json" -o "$work/busy.csv" > /dev/null 2> "$work/err"; rc=$?
  [ $rc = 2 ] && grep -q "another tpsim sweep is writing it now" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ] \
    && [ ! -s "$work/busy.csv" ] && [ ! -e "$work/busy.csv.progress" ] && pass "a second sweep on a held CSV: exit 2, nothing written" \
    || { fail "second sweep on a held CSV: exit $rc"; cat "$work/err"; }
  wait $holder  # (killing flock(1) would leave its sleep holding the lock)
  "$tpsim" sweep "$work/small_sweep.json" -o "$work/busy.csv" > /dev/null 2> "$work/err" \
    && [ "$(grep -c '^[0-9]' "$work/busy.csv")" = 4 ] && pass "the CSV is free again once its holder ends" \
    || { fail "sweep after the holder ended"; cat "$work/err"; }
else
  echo "skip: no flock(1) here (the lock is covered by the unit test)"
fi

if mount -t tmpfs -o size=8k tmpfs "$full" 2> /dev/null; then
  mounted=1
  "$tpsim" run "$root/scenarios/quickstart.json" --trace "$full/t.json" > /dev/null 2> "$work/err"; rc=$?
  [ $rc = 1 ] && grep -q "nothing was written" "$work/err" && [ -z "$(ls -A "$full")" ] && pass "trace on a full disk: exit 1, no partial file" \
    || { fail "trace on a full disk: exit $rc, left: $(ls -A "$full")"; cat "$work/err"; }
  cat > "$work/sweep.json" <<JSON
{ "base": "$root/scenarios/quickstart.json", "axes": { "workload.m": { "from": 1024, "to": 262144, "mul": 2 }, "workload.n": [1024, 2048, 3584, 4096, 7168, 8192, 14336] } }
JSON
  "$tpsim" sweep "$work/sweep.json" -o "$full/s.csv" --jobs 2 > /dev/null 2> "$work/err"; rc=$?
  if [ $rc = 1 ] && grep -q "are whole and kept" "$work/err" && [ -e "$full/s.csv.progress" ]; then
    pass "sweep on a full disk: exit 1, progress marker kept"
    # Free the disk (the cut files move to a roomy directory) and run again.
    cp "$full/s.csv" "$full/s.csv.progress" "$work/"
    umount "$full"; mounted=0
    mv "$work/s.csv" "$work/s.csv.progress" "$full/"
    out=$("$tpsim" sweep "$work/sweep.json" -o "$full/s.csv" --jobs 2 2> "$work/err") && echo "$out" | grep -q "already done" \
      && "$tpsim" sweep "$work/sweep.json" -o "$work/fresh.csv" --jobs 2 > /dev/null && cmp -s "$full/s.csv" "$work/fresh.csv" \
      && pass "the cut sweep resumes to the same CSV" || { fail "resume after a full disk"; cat "$work/err"; }
  else
    fail "sweep on a full disk: exit $rc"; cat "$work/err"
  fi
else
  echo "skip: cannot mount a tmpfs here (full-disk cases ran on /dev/full only)"
fi
echo "hostile contract: $fails failed"
[ $fails = 0 ]
