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

"$tpsim" sweep sweep.json -o - --jobs 2 > stream.csv 2> stream.err && cmp -s one.csv stream.csv && grep -q "^-: 32 points" stream.err \
  && [ -z "$(ls -A | grep -- '^-')" ] && pass "-o - streams the CSV to standard output" || fail "-o -"
"$tpsim" sweep sweep.json -o - --markdown t.md > /dev/null 2> err; rc=$?
[ $rc = 2 ] && grep -q "with -o - there is none" err && pass "-o - with --markdown refused" || fail "-o - --markdown: exit $rc"

"$tpsim" sweep sweep.json -o s0.csv --shard 0/2 > /dev/null && "$tpsim" sweep sweep.json -o s1.csv --shard 1/2 > /dev/null || fail "shards"
"$tpsim" merge s1.csv s0.csv -o merged.csv > /dev/null || fail "merge"
cmp -s one.csv merged.csv && pass "two shards merged == one run" || fail "merged differs"

# merge takes only the complete set of shards of one sweep.
merge_refused() {  # name, expected message, inputs...
  local name="$1" msg="$2"; shift 2
  rm -f m.csv
  "$tpsim" merge "$@" -o m.csv > /dev/null 2> err; local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$msg" err && [ "$(wc -l < err)" = 1 ] && [ ! -e m.csv ]; then pass "$name"; else fail "$name: exit $rc"; cat err; fi
}
merge_refused "merge: a missing shard" "points are in no shard (the first is point 1): a shard is missing" s0.csv
"$tpsim" sweep sweep.json -o t0.csv --shard 0/3 > /dev/null && "$tpsim" sweep sweep.json -o t1.csv --shard 1/3 > /dev/null \
  && "$tpsim" sweep sweep.json -o t2.csv --shard 2/3 > /dev/null || fail "three shards"
"$tpsim" merge s0.csv t0.csv t1.csv t2.csv -o mixed.csv > /dev/null && cmp -s one.csv mixed.csv \
  && pass "merge: shards of two counts that together cover every point" || fail "mixed complete merge"
merge_refused "merge: mixed counts leaving a gap" "a shard is missing" s0.csv t1.csv
sed 's/"h200"/"h800"/' sweep.json > same_columns.json
"$tpsim" sweep same_columns.json -o o1.csv --shard 1/2 > /dev/null || fail "other sweep's shard"
merge_refused "merge: a shard of another sweep with the same columns" "is of another sweep" s0.csv o1.csv
: > empty.csv
merge_refused "merge: an empty first file" "empty: not a tpsim sweep CSV" empty.csv s0.csv s1.csv
mkdir -p adir
merge_refused "merge: a directory" "is a directory" adir s1.csv

# Control characters and '|' in sweep values: one line per row, a whole Markdown table,
# shards that merge, and no raw ESC on the terminal.
cat > names.json <<'JSON'
{ "base": { "hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "variants": ["baseline", "async_tp"],
            "workload": { "op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584 } },
  "axes": { "name": ["plain", "a|b\nc", "\u001b[2Jclear"] } }
JSON
"$tpsim" sweep names.json -o names.csv --markdown names.md > /dev/null && "$tpsim" sweep names.json -o n0.csv --shard 0/2 > /dev/null \
  && "$tpsim" sweep names.json -o n1.csv --shard 1/2 > /dev/null && "$tpsim" merge n0.csv n1.csv -o nmerged.csv > /dev/null \
  && [ "$(wc -l < names.csv)" = 7 ] && cmp -s names.csv nmerged.csv && grep -qF 'a\|b\x0ac' names.md && ! grep -q $'\x1b' names.csv names.md \
  && pass "odd characters in values are escaped in CSV and Markdown" || { fail "escaping in sweep outputs"; cat names.csv names.md; }
printf '{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "\\u001b[2Jkey": 1, "workload": {"op": "matmul", "m": 8, "k": 8, "n": 8}}' > esc.json
"$tpsim" run esc.json > /dev/null 2> err; rc=$?
[ $rc = 2 ] && ! grep -q $'\x1b' err && grep -qF '\x1b[2Jkey' err && pass "an ESC in an unknown key is escaped in the error" || { fail "raw ESC: exit $rc"; cat -v err; }

# A model file the sweep reads changed: a resumed run would mix two models.
mkdir -p hw
printf '{"name": "mine", "base": "h100_sxm"}\n' > hw/mine.json
cat > own_hw.json <<'JSON'
{ "base": { "hardware": "hw/mine.json", "gpus": 8, "dtype": "bf16",
            "workload": { "op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584 }, "variants": ["baseline", "async_tp"] },
  "axes": { "workload.m": { "from": 1024, "to": 65536, "mul": 2 } } }
JSON
( TPSIM_SWEEP_KILL_AFTER=2 "$tpsim" sweep own_hw.json -o own.csv > /dev/null 2>&1 ) 2> /dev/null
printf '{"name": "mine", "base": "h100_sxm", "memory": {"hbm_efficiency": {"value": 0.5, "unit": "fraction", "source": "edited"}}}\n' > hw/mine.json
"$tpsim" sweep own_hw.json -o own.csv > /dev/null 2> err; rc=$?
[ $rc = 2 ] && grep -q "belongs to another sweep" err && pass "resume refused after a hardware file changed" || { fail "changed hardware file: exit $rc"; cat err; }

# Relative paths in a file resolve against that file, wherever tpsim runs.
mkdir -p elsewhere/hw
printf '{"name": "decoy", "base": "h100_sxm", "memory": {"hbm_efficiency": {"value": 0.3, "unit": "fraction", "source": "decoy"}}}\n' > elsewhere/hw/mine.json
python3 -c "import json; d=json.load(open('own_hw.json'))['base']; json.dump(d, open('hw_scenario.json','w'))"
here=$("$tpsim" run hw_scenario.json --json - | python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['makespan_us'])")
there=$(cd elsewhere && "$tpsim" run ../hw_scenario.json --json - | python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['makespan_us'])")
[ -n "$here" ] && [ "$here" = "$there" ] && pass "a relative hardware path means the same file from any directory" \
  || fail "relative hardware path: $here here, $there from elsewhere"

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
two='"base": {"hardware": "h100_sxm_2node", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584}}'
bad "default variants that differ across the node boundary" 'point 1 (gpus=16): its variant list (baseline, async_tp_nccl, ring, ring_bidirectional) differs in length from the first point'"'"'s (left out async_tp' "{$two, \"axes\": {\"gpus\": [8, 16]}}"
layer='"base": {"hardware": "h100_sxm_2node", "gpus": 64, "dtype": "bf16", "variants": ["async_tp_nccl"], "workload": {"op": "transformer_layer", "model": "llama3_405b", "tokens": 65536, "seq_len": 8192, "pass": "forward_backward", "layers": 1}}'
bad "the op-count bound, before any point runs" 'bad.json: point 2 (workload.layers=1000): the op graph would have about' "{$layer, \"axes\": {\"workload.layers\": [1, 2, 1000]}}"
"$tpsim" sweep sweep.json --shard 2/2 -o x.csv > /dev/null 2> err; rc=$?
[ $rc = 2 ] && grep -q "is not I/N" err && pass "bad shard" || fail "bad shard: exit $rc"

echo "sweep contract: $fails failed"
[ "$fails" = 0 ]
