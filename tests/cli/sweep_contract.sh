#!/usr/bin/env bash
# Sweeps from outside: thread-count and sharding invariance, kill -9 and resume,
# bad sweep files rejected before any work.
set -u
tpsim="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0
pass() { echo "ok $1"; }
fail() { echo "FAIL $1"; fails=$((fails+1)); }
cat > sweep.json <<'JSON'
{ "base": { "hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
            "workload": { "op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584 },
            "variants": ["baseline", "async_tp", "ring"] },
  "axes": { "hardware": ["h100_sxm", "h200"],
            "workload.n": [1024, 3584],
            "workload.m": { "from": 1024, "to": 131072, "mul": 2 } } }
JSON
"$tpsim" sweep sweep.json -o one.csv --jobs 1 > /dev/null || fail "jobs 1 run"
"$tpsim" sweep sweep.json -o two.csv --jobs 2 --markdown two.md > /dev/null || fail "jobs 2 run"
cmp -s one.csv two.csv && pass "jobs 1 == jobs 2" || fail "jobs 1 != jobs 2"
"$tpsim" sweep sweep.json -o many.csv --jobs 1000000 > /dev/null 2> many.err || fail "jobs 1000000 run"
grep -q "is more than 4 per core; using" many.err && cmp -s one.csv many.csv && pass "--jobs capped, said so" || fail "--jobs 1000000"
[ "$(wc -l < one.csv)" = "$((1 + 32 * 3))" ] && pass "one row per point and variant" || fail "row count $(wc -l < one.csv)"
grep -q "async_tp speedup" two.md && pass "markdown" || fail "markdown"
[ ! -e one.csv.progress ] && pass "progress marker removed" || fail "progress marker left"

"$tpsim" sweep sweep.json -o s0.csv --shard 0/2 > /dev/null && "$tpsim" sweep sweep.json -o s1.csv --shard 1/2 > /dev/null || fail "shards"
"$tpsim" merge s1.csv s0.csv -o merged.csv > /dev/null || fail "merge"
cmp -s one.csv merged.csv && pass "two shards merged == one run" || fail "merged differs"

# kill -9 midway (the hook raises SIGKILL after 5 points are on disk), then resume.
TPSIM_SWEEP_KILL_AFTER=5 "$tpsim" sweep sweep.json -o killed.csv --jobs 2 > /dev/null 2>&1
rc=$?
[ "$rc" = 137 ] && pass "killed by SIGKILL" || fail "kill hook: exit $rc"
[ -e killed.csv.progress ] && pass "unfinished run marked" || fail "no progress marker after kill"
rows=$(($(wc -l < killed.csv) - 1))
[ "$rows" -ge 15 ] && [ "$rows" -lt 96 ] && pass "partial file kept ($rows rows)" || fail "partial rows $rows"
printf '17,h100_sxm,3584,torn' >> killed.csv   # a torn last line, as a kill mid-write leaves
out=$("$tpsim" sweep sweep.json -o killed.csv --jobs 2) || fail "resume"
echo "$out" | grep -q "already done" && pass "resume reports done points" || fail "resume output: $out"
cmp -s one.csv killed.csv && pass "killed + resumed == uninterrupted" || fail "resumed file differs"
again=$("$tpsim" sweep sweep.json -o killed.csv)
echo "$again" | grep -q "32 already done, 0 simulated" && cmp -s one.csv killed.csv && pass "rerun of a finished sweep does nothing" || fail "rerun: $again"

# A different sweep may not resume into this file.
sed 's/131072/65536/' sweep.json > other.json
TPSIM_SWEEP_KILL_AFTER=3 "$tpsim" sweep other.json -o other.csv > /dev/null 2>&1
"$tpsim" sweep sweep.json -o other.csv > /dev/null 2> err; rc=$?
[ $rc = 2 ] && grep -q "belongs to another sweep" err && pass "foreign progress refused" || { fail "foreign resume: exit $rc"; cat err; }

bad() {  # name, expected message, sweep text
  printf '%s' "$3" > bad.json
  rm -f bad.csv
  "$tpsim" sweep bad.json -o bad.csv > /dev/null 2> err; local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$2" err && [ "$(wc -l < err)" = 1 ] && [ ! -e bad.csv ]; then pass "$1"; else fail "$1: exit $rc"; cat err; fi
}
base='"base": {"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584}}'
bad "unknown axis field" 'unknown scenario field "workload.kk" (did you mean "workload.k"?)' "{$base, \"axes\": {\"workload.kk\": [1]}}"
bad "empty range" 'empty range' "{$base, \"axes\": {\"workload.m\": {\"from\": 9, \"to\": 1, \"step\": 1}}}"
bad "exploding range" 'more than the 1000000 points' "{$base, \"axes\": {\"workload.m\": {\"from\": 1, \"to\": 99999999999, \"step\": 1}}}"
bad "a bad point" 'point 1 (gpus=3): $.workload.m: 16384 rows do not divide evenly over 3 GPUs' "{$base, \"axes\": {\"gpus\": [2, 3]}}"
"$tpsim" sweep sweep.json --shard 2/2 -o x.csv > /dev/null 2> err; rc=$?
[ $rc = 2 ] && grep -q "is not I/N" err && pass "bad shard" || fail "bad shard: exit $rc"

echo "sweep contract: $fails failed"
[ "$fails" = 0 ]
