#!/usr/bin/env bash
# The CLI contract from outside: exit codes, one-line errors naming the JSON path,
# --json - on stdout, byte-identical reruns.
set -u
tpsim="$1"
root="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
check() {  # name, expected exit, expected stderr substring, scenario text
  local name="$1" want_rc="$2" want_msg="$3" text="$4"
  printf '%s' "$text" > "$work/s.json"
  "$tpsim" run "$work/s.json" > "$work/out" 2> "$work/err"
  local rc=$?
  local lines
  lines=$(wc -l < "$work/err")
  if [ "$rc" != "$want_rc" ]; then echo "FAIL $name: exit $rc, wanted $want_rc"; cat "$work/err"; fails=$((fails+1)); return; fi
  if [ -n "$want_msg" ]; then
    if ! grep -qF -- "$want_msg" "$work/err"; then echo "FAIL $name: stderr lacks '$want_msg':"; cat "$work/err"; fails=$((fails+1)); return; fi
    if [ "$lines" != 1 ]; then echo "FAIL $name: $lines lines on stderr"; cat "$work/err"; fails=$((fails+1)); return; fi
  fi
  echo "ok $name"
}
base='"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16"'
check "good scenario" 0 "" "{$base, \"workload\": {\"op\": \"allgather_matmul\", \"m\": 4096, \"k\": 4096, \"n\": 4096}}"
check "misspelled key" 2 '$.workload: unknown key "nn" (did you mean "n"?)' "{$base, \"workload\": {\"op\": \"allgather_matmul\", \"m\": 4096, \"k\": 4096, \"nn\": 4096}}"
check "wrong type" 2 '$.gpus: must be a positive integer, got string' '{"hardware": "h100_sxm", "gpus": "8", "dtype": "bf16", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}}'
check "non-positive" 2 '$.workload.k: must be a positive integer, got -5' "{$base, \"workload\": {\"op\": \"matmul\", \"m\": 1, \"k\": -5, \"n\": 1}}"
check "non-divisible" 2 '$.workload.m: 4100 rows do not divide evenly over 8 GPUs' "{$base, \"workload\": {\"op\": \"allgather_matmul\", \"m\": 4100, \"k\": 4096, \"n\": 4096}}"
check "unknown hardware" 2 '$.hardware: unknown hardware "h100_smx" (did you mean "h100_sxm"?)' '{"hardware": "h100_smx", "gpus": 8, "dtype": "bf16", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}}'
check "unknown variant" 2 '$.variants[1]: variant "fuzed" is not available for allgather_matmul (did you mean "fused"?)' "{$base, \"workload\": {\"op\": \"allgather_matmul\", \"m\": 4096, \"k\": 4096, \"n\": 4096}, \"variants\": [\"baseline\", \"fuzed\"]}"
check "variant of another op" 2 '$.variants[0]: variant "fused" is not available for matmul_reducescatter' "{$base, \"workload\": {\"op\": \"matmul_reducescatter\", \"m\": 4096, \"k\": 4096, \"n\": 4096}, \"variants\": [\"fused\"]}"
check "unknown op" 2 '$.workload.op: unknown op "allgather_matmull" (did you mean "allgather_matmul"?)' "{$base, \"workload\": {\"op\": \"allgather_matmull\", \"m\": 1, \"k\": 1, \"n\": 1}}"
check "GEMM larger than any GPU" 2 '$.workload: a 16777216 x 16777216 operand' "{$base, \"workload\": {\"op\": \"matmul\", \"m\": 16777216, \"k\": 16777216, \"n\": 16777216}}"
check "malformed JSON" 2 'malformed JSON' "{$base, \"workload\": "
check "not an object" 2 '$: must be an object, got array' '[1, 2]'
check "unknown reduction kernel" 2 '$.software.symm_mem_reduction: unknown reduction "torch_sum" (aten_sum or triton)' "{$base, \"software\": {\"symm_mem_reduction\": \"torch_sum\"}, \"workload\": {\"op\": \"matmul_reducescatter\", \"m\": 4096, \"k\": 4096, \"n\": 4096}}"
"$tpsim" run "$work/missing.json" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 2 ] && grep -q "no such file" "$work/err"; then echo "ok missing file"; else echo "FAIL missing file: exit $rc"; fails=$((fails+1)); fi
"$tpsim" frobnicate > /dev/null 2>&1; rc=$?
if [ $rc = 2 ]; then echo "ok unknown subcommand"; else echo "FAIL unknown subcommand: exit $rc"; fails=$((fails+1)); fi
check "duplicate key" 2 '$: duplicate key "gpus"' "{$base, \"gpus\": 4, \"workload\": {\"op\": \"matmul\", \"m\": 1, \"k\": 1, \"n\": 1}}"
# Training steps with context parallelism: the contract's keys, and bad input as one line.
cp_step() {  # seq_len, cp_method
  printf '{"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16", "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": %s, "local_batch": 1, "mesh": {"tp": 8, "cp": 2}, "cp_method": "%s"}, "variants": ["baseline", "async_tp"]}' "$1" "$2"
}
check "cp seq_len not in 2 x cp chunks" 2 '$.workload.seq_len: 16382 tokens do not split into 2 x cp = 4 equal chunks' "$(cp_step 16382 ring)"
check "cp_method typo" 2 '$.workload.cp_method: unknown value "rign" (did you mean "ring"?)' "$(cp_step 16384 rign)"
for method in ring allgather; do
  cp_step 16384 "$method" > "$work/cp.json"
  if "$tpsim" run "$work/cp.json" --json - 2> /dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["results"]
assert len(r) == 2
for v in r:
    assert v["exposed_comm_ms"]["cp"] > 0, v["exposed_comm_ms"]
    assert any(c["dim"] == "cp" for c in v["collectives"])
    assert "context-parallel K/V buffers" in v["memory_gib"]
    assert v["step_time_ms"] > 0 and 0 < v["mfu"] < 1
'; then echo "ok cp $method run"; else echo "FAIL cp $method run"; fails=$((fails+1)); fi
done
# Mixture-of-experts training steps with expert parallelism.
moe_step() {  # ep, extra workload keys
  printf '{"hardware": "h100_sxm", "gpus": %s, "dtype": "bf16", "workload": {"op": "training_step", "model": "mixtral_8x7b", "seq_len": 4096, "local_batch": 1, "mesh": {"tp": 2, "ep": %s}%s}, "variants": ["baseline"]}' "$((2 * $1))" "$1" "$2"
}
check "ep not dividing the experts" 2 '$.workload.mesh.ep: 8 experts do not divide over ep 3' "$(moe_step 3 '')"
check "negative skew" 2 '$.workload.expert_load_skew: must be a number >= 0, got -1' "$(moe_step 4 ', "expert_load_skew": -1')"
check "norm without eager kernels" 2 '$.workload.norm: says how eager PyTorch runs the norms' "$(moe_step 4 ', "norm": "fused"')"
check "eager MoE with fused norms runs" 0 '' "$(moe_step 4 ', "elementwise": "aten", "norm": "fused"')"
check "unknown expert_gemm" 2 '$.workload.expert_gemm: unknown value "grouped"' "$(moe_step 4 ', "expert_gemm": "grouped"')"
check "grouped_mm experts run" 0 '' "$(moe_step 4 ', "expert_gemm": "grouped_mm"')"
moe_step 4 ', "expert_load_skew": 1' > "$work/moe.json"
if "$tpsim" run "$work/moe.json" --json - 2> /dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)["results"][0]
assert v["exposed_comm_ms"]["ep"] > 0, v["exposed_comm_ms"]
assert any(c["dim"] == "ep" and c["op"].startswith("all_to_all") for c in v["collectives"])
assert v["moe_layer_ms"]["backward"] > v["moe_layer_ms"]["forward"] > 0
'; then echo "ok moe run"; else echo "FAIL moe run"; fails=$((fails+1)); fi
# A routing histogram: one number per expert; a hot expert across nodes makes the dispatch
# (into its rank's NIC) slower than the combine (out through its node's NICs, paced by the
# hot rank's NCCL blocks: a communicator across nodes plans 2 channels a peer).
check "expert_load length" 2 '$.workload.expert_load: must be an array of 8 numbers (one per expert), got 3 numbers' "$(moe_step 8 ', "expert_load": [1, 2, 3]')"
moe_step 8 ', "expert_load": [7, 1, 1, 1, 1, 1, 1, 1]' > "$work/moe_hot.json"
if "$tpsim" run "$work/moe_hot.json" --json - 2> /dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)["results"][0]
ep = {c["op"]: c for c in v["collectives"] if c["dim"] == "ep"}
assert ep["all_to_all (dispatch)"]["link"] == "nic", ep
assert ep["all_to_all (dispatch)"]["time_ms"] > 1.1 * ep["all_to_all (combine)"]["time_ms"], ep
'; then echo "ok moe histogram run"; else echo "FAIL moe histogram run"; fails=$((fails+1)); fi
# Inputs that are not regular files, stdin, --version, a misspelled command.
one_line() {  # name, expected stderr substring, command...
  local name="$1" want="$2"; shift 2
  "$@" > /dev/null 2> "$work/err" < /dev/null; local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$want" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ]; then echo "ok $name"
  else echo "FAIL $name: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
}
one_line "directory as scenario" "is a directory, not a file" "$tpsim" run "$work"
one_line "device as scenario" "not a regular file" "$tpsim" run /dev/zero
one_line "misspelled command" 'unknown command "rn" (did you mean "run"?)' "$tpsim" rn "$work/s.json"
if "$tpsim" run - --json - < "$root/scenarios/quickstart.json" | python3 -c 'import json,sys; assert json.load(sys.stdin)["results"]'; then
  echo "ok scenario on stdin"; else echo "FAIL scenario on stdin"; fails=$((fails+1)); fi
# A TP group of one GPU: NCCL's one-rank copy and PyTorch's loops with no step; other variants are left out.
one_gpu='{"hardware": "h100_sxm", "gpus": 1, "dtype": "fp32", "workload": {"op": "matmul_reducescatter", "m": 128, "k": 4096, "n": 6656}}'
if printf '%s' "$one_gpu" | "$tpsim" run - --json - 2> /dev/null | python3 -c '
import json, sys
r = {x["variant"]: x for x in json.load(sys.stdin)["results"]}
assert sorted(r) == ["async_tp", "async_tp_single_stream", "baseline"], sorted(r)
assert all(x["makespan_us"] > 100 for x in r.values())'; then
  echo "ok one-GPU group"; else echo "FAIL one-GPU group"; fails=$((fails+1)); fi
check "one-GPU group refuses ring" 2 '$.variants[1]: ring has no form for a group of one GPU' \
  '{"hardware": "h100_sxm", "gpus": 1, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 128, "k": 4096, "n": 6656}, "variants": ["baseline", "ring"]}'
if "$tpsim" --version | grep -Eq '^tpsim [0-9]+\.[0-9]+\.[0-9]+ \(models: .+\)$'; then echo "ok --version"; else echo "FAIL --version"; fails=$((fails+1)); fi
# Hardware values outside physics are refused, not simulated into plausible nonsense.
python3 - "$root/models/h100_sxm.json" "$work/slow_nvlink.json" <<'PY'
import json, sys
hw = json.load(open(sys.argv[1]))
hw["fabric"]["nvlink"]["bandwidth_per_direction"]["value"] = 1e-8
json.dump(hw, open(sys.argv[2], "w"))
PY
one_line "absurd hardware value" 'is outside what any GPU system has' "$tpsim" hardware show "$work/slow_nvlink.json"

# --json - prints only JSON on stdout; a rerun is byte-identical, trace included.
"$tpsim" run "$root/scenarios/quickstart.json" --json - --trace "$work/a.trace.json" > "$work/a.json" || { echo "FAIL quickstart"; fails=$((fails+1)); }
"$tpsim" run "$root/scenarios/quickstart.json" --json - --trace "$work/b.trace.json" > "$work/b.json"
if python3 -c "import json,sys; r=json.load(open('$work/a.json')); assert r['results'][0]['variant']=='baseline' and r['results'][1]['makespan_us']>0"; then
  echo "ok json on stdout"; else echo "FAIL json on stdout"; fails=$((fails+1)); fi
if cmp -s "$work/a.json" "$work/b.json" && cmp -s "$work/a.trace.json" "$work/b.trace.json"; then echo "ok byte-identical rerun"; else echo "FAIL rerun differs"; fails=$((fails+1)); fi
# The CLI restarts itself with huge pages for its heap unless told not to; the same bytes either way.
TPSIM_NO_RESTART=1 "$tpsim" run "$root/scenarios/quickstart.json" --json - --trace "$work/c.trace.json" > "$work/c.json"
GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$tpsim" run "$root/scenarios/quickstart.json" --json - > "$work/d.json"
if cmp -s "$work/a.json" "$work/c.json" && cmp -s "$work/a.trace.json" "$work/c.trace.json" && cmp -s "$work/a.json" "$work/d.json"; then
  echo "ok same output without the huge-page restart"; else echo "FAIL output depends on the huge-page restart"; fails=$((fails+1)); fi
"$tpsim" run "$root/scenarios/quickstart.json" > "$work/table"
if grep -q "async_tp" "$work/table" && grep -q "speedup" "$work/table"; then echo "ok table"; else echo "FAIL table"; fails=$((fails+1)); fi

# The software choice is echoed in the result JSON, and changes the reduce-scatter's end
# (over 2 GPUs: ATen's sum of 2 partials pays per output, far below HBM; of 8 it is HBM-bound too).
printf '%s' "{\"hardware\": \"h100_sxm\", \"gpus\": 2, \"dtype\": \"bf16\", \"software\": {\"symm_mem_reduction\": \"triton\"}, \"workload\": {\"op\": \"matmul_reducescatter\", \"m\": 16384, \"k\": 3584, \"n\": 8192}, \"variants\": [\"async_tp\"]}" > "$work/rs_triton.json"
sed 's/"triton"/"aten_sum"/' "$work/rs_triton.json" > "$work/rs_aten.json"
"$tpsim" run "$work/rs_triton.json" --json "$work/rs_triton.out" > /dev/null && "$tpsim" run "$work/rs_aten.json" --json "$work/rs_aten.out" > /dev/null
if python3 -c "
import json
t = json.load(open('$work/rs_triton.out')); a = json.load(open('$work/rs_aten.out'))
assert t['software']['symm_mem_reduction'] == 'triton' and a['software']['symm_mem_reduction'] == 'aten_sum'
assert t['software']['op_issue'] == 'compiled'
assert t['software']['async_tp_regions'] == 'micro_pipeline'
assert t['results'][0]['makespan_us'] < a['results'][0]['makespan_us']
"; then echo "ok software echoed and used"; else echo "FAIL software choice"; fails=$((fails+1)); fi

# Eager issue: the host pays Python and the dispatcher per op; at a small shape it becomes the critical path.
printf '%s' "{$base, \"software\": {\"op_issue\": \"eager\"}, \"workload\": {\"op\": \"allgather_matmul\", \"m\": 1024, \"k\": 1024, \"n\": 1024}, \"variants\": [\"async_tp\"]}" > "$work/eager.json"
if "$tpsim" run "$work/eager.json" | grep -q "host [0-9]*%"; then echo "ok eager issue shows the host"; else echo "FAIL eager issue"; "$tpsim" run "$work/eager.json"; fails=$((fails+1)); fi

# validate: per row and per class, as text and JSON; a bad hardware name is one line, exit 2.
if "$tpsim" validate --hardware h100_sxm "$root/models/measurements/kraken_h100_async_tp_validation.json" \
     "$root/models/measurements/pytorch_h100_async_tp_validation.json" --json "$work/val.json" > "$work/val.txt" \
   && grep -q "mean|err| as given" "$work/val.txt" \
   && python3 -c "import json; v = json.load(open('$work/val.json')); r = v['rows']; assert len(r) == 38 and all(x['predicted_us'] > 0 for x in r); assert len(v['speedups']) == 19"; then
  echo "ok validate"; else echo "FAIL validate"; cat "$work/val.txt"; fails=$((fails+1)); fi
"$tpsim" validate --hardware h100_smx "$root/models/measurements/kraken_h100_async_tp_validation.json" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 2 ] && grep -q 'did you mean "h100_sxm"' "$work/err" && [ "$(wc -l < "$work/err")" = 1 ]; then echo "ok validate typo"; else echo "FAIL validate typo: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi

# Every shipped scenario runs; hardware list and show work.
for f in "$root"/scenarios/*.json; do
  case "$(basename "$f")" in
    sweep_*) cmd=(sweep "$f" -o "$work/sweep.csv"); rm -f "$work/sweep.csv" ;;
    *) cmd=(run "$f") ;;
  esac
  if "$tpsim" "${cmd[@]}" > /dev/null 2> "$work/err"; then :; else echo "FAIL scenario $f"; cat "$work/err"; fails=$((fails+1)); fi
done
"$tpsim" run "$root/scenarios/sweep_variants_over_gpus.json" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 2 ] && grep -q "run it with tpsim sweep" "$work/err"; then echo "ok run on a sweep file"; else echo "FAIL run on a sweep file: exit $rc"; fails=$((fails+1)); fi
echo "ok shipped scenarios"
if "$tpsim" hardware list | grep -q h100_sxm && "$tpsim" hardware show h200 | grep -q "memory.hbm_bandwidth"; then echo "ok hardware list/show"; else echo "FAIL hardware list/show"; fails=$((fails+1)); fi
if "$tpsim" workloads | grep -q "^training_step$" && "$tpsim" workloads | grep -q "keys: op, m, k, n"; then echo "ok workloads"; else echo "FAIL workloads"; fails=$((fails+1)); fi
"$tpsim" hardware show h100_smx > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 2 ] && grep -q 'did you mean "h100_sxm"' "$work/err"; then echo "ok hardware show typo"; else echo "FAIL hardware show typo: exit $rc"; fails=$((fails+1)); fi

# measure: the launch plan without a GPU.
if "$tpsim" measure "$root/scenarios/quickstart.json" --dry-run -o "$work/plan.json" > "$work/plan.txt" && grep -q cudaMemcpyPeerAsync "$work/plan.txt" && grep -q '"ranks"' "$work/plan.json"; then echo "ok measure --dry-run"; else echo "FAIL measure --dry-run"; fails=$((fails+1)); fi
# An op the backend cannot run is refused before any GPU work (exit 2), unless --stand-in is asked for.
"$tpsim" measure "$root/scenarios/seed002_pallas_2gpu.json" -o "$work/measured.json" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 2 ] && grep -q 'is not run by the CUDA backend; measure other variants, or add --stand-in' "$work/err" && [ "$(wc -l < "$work/err")" = 1 ]; then
  echo "ok measure refuses ops it cannot run"; else echo "FAIL measure of a fused kernel: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
# The CUDA backend is a plugin: the executable itself never links the CUDA libraries,
# so run and sweep start without them; a missing plugin is one line, exit 3.
if ldd "$tpsim" | grep -qiE "libcudart|libcublas|libnccl"; then echo "FAIL tpsim links CUDA libraries directly"; fails=$((fails+1));
else echo "ok tpsim loads no CUDA library until a GPU is needed"; fi
TPSIM_CUDA_BACKEND="$work/absent.so" "$tpsim" measure "$root/scenarios/quickstart.json" -o "$work/measured.json" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 3 ] && grep -qE "CUDA backend was not found|without the CUDA backend" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ]; then
  echo "ok measure without its plugin says so"; else echo "FAIL measure without its plugin: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
printf 'not a library' > "$work/bad.so"
TPSIM_CUDA_BACKEND="$work/bad.so" "$tpsim" measure "$root/scenarios/quickstart.json" -o "$work/measured.json" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 3 ] && grep -qE "could not be loaded|without the CUDA backend" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ]; then
  echo "ok a broken plugin is one line"; else echo "FAIL broken plugin: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
# Without enough GPUs (or without the CUDA backend in this build) measure and microbench say so: exit 3, one line.
if [ "$("$tpsim" microbench --dry-run | wc -l)" -gt 20 ]; then echo "ok microbench --dry-run"; else echo "FAIL microbench --dry-run"; fails=$((fails+1)); fi
only="$("$tpsim" microbench --dry-run --only "cuBLASLt algorithm" --only launch)"
if [ "$(wc -l <<< "$only")" = 85 ] && [ "$(grep -c "cuBLASLt algorithm [1-7] " <<< "$only")" = 84 ]; then echo "ok microbench --only"
else echo "FAIL microbench --only: $(wc -l <<< "$only") rows"; fails=$((fails+1)); fi
"$tpsim" microbench --dry-run --only "no such row" > /dev/null 2> "$work/err"; rc=$?
if [ $rc = 2 ] && [ "$(wc -l < "$work/err")" = 1 ] && grep -q -- '--only: no row' "$work/err"; then echo "ok microbench --only matching nothing is one line"
else echo "FAIL microbench --only matching nothing: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
if ! nvidia-smi -L > /dev/null 2>&1; then
  "$tpsim" measure "$root/scenarios/quickstart.json" -o "$work/measured.json" > /dev/null 2> "$work/err"; rc=$?
  if [ $rc = 3 ] && grep -qE "GPUs, this machine has|without the CUDA backend" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ] && [ ! -e "$work/measured.json" ]; then
    echo "ok measure without GPUs says so"; else echo "FAIL measure without GPUs: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
  "$tpsim" measure "$root/scenarios/seed002_pallas_2gpu.json" --stand-in -o "$work/measured.json" > /dev/null 2> "$work/err"; rc=$?
  if [ $rc = 3 ] && [ "$(wc -l < "$work/err")" = 1 ]; then echo "ok measure --stand-in without GPUs says so"; else echo "FAIL measure --stand-in without GPUs: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
  "$tpsim" microbench -o "$work/micro.json" > /dev/null 2> "$work/err"; rc=$?
  if [ $rc = 3 ] && [ "$(wc -l < "$work/err")" = 1 ]; then echo "ok microbench without GPUs says so"; else echo "FAIL microbench without GPUs: exit $rc"; fails=$((fails+1)); fi
fi

# An output on standard output comes after what was printed before it, piped or not.
"$tpsim" calibrate --measurements "$root/models/measurements/h100_sxm_published.json" --hardware h100_sxm -o - --max-evals 5 > "$work/cal_stdout.txt" 2> /dev/null
if head -1 "$work/cal_stdout.txt" | grep -q "measurements from" && tail -c 2 "$work/cal_stdout.txt" | grep -q "}"; then echo "ok calibrate -o - keeps the report before the model"
else echo "FAIL calibrate -o - order"; head -2 "$work/cal_stdout.txt"; fails=$((fails+1)); fi
# calibrate: published measurements in, a model that run accepts out; bad files are one line.
if "$tpsim" calibrate --measurements "$root/models/measurements/h100_sxm_published.json" --hardware h100_sxm -o "$work/mine.json" > "$work/cal.txt" \
   && grep -q "mean|err| after" "$work/cal.txt" \
   && sed "s#\"h100_sxm\"#\"$work/mine.json\"#" "$root/scenarios/quickstart.json" > "$work/q.json" && "$tpsim" run "$work/q.json" > /dev/null; then
  echo "ok calibrate"; else echo "FAIL calibrate"; cat "$work/cal.txt"; fails=$((fails+1)); fi
check_calibrate() {  # name, expected stderr substring, measurement file text
  printf '%s' "$3" > "$work/m.json"
  "$tpsim" calibrate --measurements "$work/m.json" --hardware h100_sxm -o "$work/never.json" > /dev/null 2> "$work/err"; local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$2" "$work/err" && [ "$(wc -l < "$work/err")" = 1 ] && [ ! -e "$work/never.json" ]; then echo "ok $1"
  else echo "FAIL $1: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
}
check_calibrate "measurement kind typo" '$.measurements[0].kind: unknown kind "peer_cpy" (did you mean "peer_copy"?)' \
  '{"format": "tpsim-measurements", "measurements": [{"kind": "peer_cpy", "bytes": 1, "time_us": 1}]}'
check_calibrate "measurement without a value" '$.measurements[0]: give exactly one measured value' \
  '{"format": "tpsim-measurements", "measurements": [{"kind": "launch"}]}'
check_calibrate "truncated trace" 'malformed JSON' '{"traceEvents": [{"ph": "X"'
check_calibrate "trace without kernels" '$.traceEvents: holds no GEMM kernel' '{"traceEvents": []}'
check_calibrate "unknown file kind" 'is neither a measurement file' '{"rows": []}'

# The shipped power law is what its tool computes from the shipped clock run, and a run on the
# power-limited part says the tensor-core speed it got.
fitted="$(python3 "$root/tools/fit_power_exponent.py" "$root/models/measurements/power/h100_sxm_gemm_clock.json" | sed -n 's/^exponent: \([0-9.]*\).*/\1/p')"
shipped="$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["power"]["speed_power_exponent"]["value"])' "$root/models/h100_sxm.json")"
"$tpsim" run "$root/scenarios/seed001_llama3_70b_forward_hbm2e.json" > /dev/null 2> "$work/err"
if [ -n "$fitted" ] && [ "$fitted" = "$shipped" ] && grep -q "500 W limit holds its tensor cores at 0.844" "$work/err"; then echo "ok power law"
else echo "FAIL power law: tool $fitted, model $shipped"; cat "$work/err"; fails=$((fails+1)); fi

fitted="$(python3 "$root/tools/fit_power_exponent.py" "$root/models/measurements/power/h200_gemm_clock_duty.json" | sed -n 's/^exponent: \([0-9.]*\).*/\1/p')"
shipped="$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["power"]["speed_power_exponent"]["value"])' "$root/models/h200.json")"
if [ -n "$fitted" ] && [ "$fitted" = "$shipped" ]; then echo "ok H200 power law"; else echo "FAIL H200 power law: tool $fitted, model $shipped"; fails=$((fails+1)); fi

# The launch gap between two different kernels: the shipped H100 value is what its step
# profiles' gaps give (the H200 takes it), and a file that is no profile is one line and exit 2.
measured="$(python3 "$root/tools/step_profile_gaps.py" "$root"/models/measurements/step_profiles/h100_sxm_*.json.gz | sed -n 's/^median: \([0-9.]*\)$/\1/p')"
shipped="$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["launch"]["device_latency"]["value"])' "$root/models/h100_sxm.json")"
if [ -n "$measured" ] && [ "$measured" = "$shipped" ]; then echo "ok launch gap from the step profiles"
else echo "FAIL launch gap from the step profiles: tool $measured, model $shipped"; fails=$((fails+1)); fi
for not_a_profile in "$root/models/h100_sxm.json" "$root/scenarios/sweep_async_tp_crossover.png"; do
  python3 "$root/tools/step_profile_gaps.py" "$not_a_profile" > /dev/null 2> "$work/err"; rc=$?
  if [ $rc = 2 ] && [ "$(wc -l < "$work/err")" = 1 ]; then echo "ok step_profile_gaps: $(basename "$not_a_profile") is no profile, one line"
  else echo "FAIL step_profile_gaps on $(basename "$not_a_profile"): exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
done

# cuBLAS's own plans, named from the kernels the thin sweep recorded: every row gets one (a
# split kernel its slices), and tpsim prices the file.
python3 "$root/tools/cublas_plans.py" "$root/models/measurements/h100_sxm_thin_gemm.json" -o "$work/planned.json" 2> "$work/err"; rc=$?
first_plan="$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["measurements"][0]["plan"], sort_keys=True))' "$work/planned.json" 2> /dev/null)"
if [ $rc = 0 ] && grep -q "261 GEMM rows name cuBLAS's plan" "$work/err" && [ "$first_plan" = '{"split_k": 2, "tile": "32x64x64"}' ] &&
    "$tpsim" validate --hardware h100_sxm "$work/planned.json" --json "$work/planned_rows.json" > "$work/out" 2>&1 && grep -q "^gemm  *261 " "$work/out"; then
  echo "ok cuBLAS plans named from kernels"
else echo "FAIL cuBLAS plans named from kernels: exit $rc, first plan $first_plan"; cat "$work/err" "$work/out"; fails=$((fails+1)); fi
# Those rows' errors by the kernel's cluster and the weight's size: every bf16 and fp8 row in a group.
python3 "$root/tools/errors_by_kernel.py" "$work/planned.json" "$work/planned_rows.json" > "$work/by_kernel" 2> "$work/err"; rc=$?
grouped="$(awk '$1 == "bf16" || $1 == "fp8" { n += $(NF-2) } END { print n }' "$work/by_kernel")"
if [ $rc = 0 ] && [ "$grouped" = 261 ] && grep -qE '^bf16 +2 +>= 40 MB +130 ' "$work/by_kernel"; then echo "ok errors by kernel cluster"
else echo "FAIL errors by kernel cluster: exit $rc, $grouped rows grouped"; cat "$work/by_kernel" "$work/err"; fails=$((fails+1)); fi
# The same from the cuBLASLt algorithms microbench records: tile, stages' K depth, split-K and cluster as given.
python3 "$root/tools/cublas_plans.py" "$root/models/measurements/h100_sxm_microbench.json" -o "$work/planned_micro.json" 2> "$work/err"; rc=$?
thin_plan="$(python3 -c 'import json,sys; print([json.dumps(r["plan"], sort_keys=True) for r in json.load(open(sys.argv[1]))["measurements"] if r["name"] == "gemm 64x3584x8192 bf16"][0])' "$work/planned_micro.json" 2> /dev/null)"
if [ $rc = 0 ] && grep -q "37 GEMM rows name cuBLAS's plan" "$work/err" && [ "$thin_plan" = '{"cluster": "1x4", "split_k": 2, "tile": "64x80x64"}' ] &&
    "$tpsim" validate --hardware h100_sxm "$work/planned_micro.json" > "$work/out" 2>&1 && grep -q "^gemm  *37 " "$work/out"; then
  echo "ok cuBLAS plans named from cuBLASLt algorithms"
else echo "FAIL cuBLAS plans named from cuBLASLt algorithms: exit $rc, plan $thin_plan"; cat "$work/err"; fails=$((fails+1)); fi
printf '{"measurements": [{"kind": "gemm", "m": "big", "n": 8, "k": 8}]}' > "$work/bad_rows.json"
python3 "$root/tools/cublas_plans.py" "$work/bad_rows.json" -o "$work/bad_planned.json" 2> "$work/err"; rc=$?
if [ $rc = 2 ] && [ "$(wc -l < "$work/err")" = 1 ] && grep -q 'measurements\[0\]: a GEMM row needs' "$work/err" && [ ! -e "$work/bad_planned.json" ]; then
  echo "ok cuBLAS plans: a bad row is one line, nothing written"
else echo "FAIL cuBLAS plans on a bad row: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi

# The GPU measurement tools: without PyTorch or a GPU, one line, exit 3 and nothing written.
if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  echo "skip GPU tools without a GPU: this machine has one"
else
  for tool_args in "torch_op_bench.py --hardware h100_sxm" "torch_memory_bound_bench.py --hardware h100_sxm" \
      "torch_tp_one_rank_bench.py --hardware h100_sxm" "torch_thin_gemm_bench.py --hardware h100_sxm --kernels $work/gpu_tool_kernels.json" \
      "torch_copy_beside_gemm_bench.py" "torch_gemm_clock_bench.py" "torch_train_step_bench.py" "torch_async_tp_rank_bench.py --hardware h100_sxm" \
      "torch_fp8_linear_bench.py --hardware h100_sxm --casts $work/gpu_tool_kernels.json" \
      "torch_compiled_kernels_bench.py --hardware h100_sxm --report $work/gpu_tool_kernels.json"; do
    read -r -a words <<< "$tool_args"
    python3 "$root/tools/${words[0]}" -o "$work/gpu_tool.json" "${words[@]:1}" > /dev/null 2> "$work/err"; rc=$?
    if [ $rc = 3 ] && [ "$(wc -l < "$work/err")" = 1 ] && [ ! -e "$work/gpu_tool.json" ] && [ ! -e "$work/gpu_tool_kernels.json" ]; then
      echo "ok ${words[0]} without a GPU"
    else echo "FAIL ${words[0]} without a GPU: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
  done
fi

# The cluster-occupancy probe: built by nvcc where one is installed; without a GPU, one line, exit 3.
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if [ ! -x "$nvcc" ]; then
  echo "skip cluster_occupancy.cu: no nvcc here"
elif ! "$nvcc" -arch=sm_90 -o "$work/cluster_occupancy" "$root/tools/cluster_occupancy.cu" 2> "$work/err"; then
  echo "FAIL cluster_occupancy.cu does not build"; cat "$work/err"; fails=$((fails+1))
elif python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  echo "skip cluster_occupancy without a GPU: this machine has one"
else
  "$work/cluster_occupancy" > "$work/occupancy.json" 2> "$work/err"; rc=$?
  if [ $rc = 3 ] && [ "$(wc -l < "$work/err")" = 1 ] && [ ! -s "$work/occupancy.json" ]; then echo "ok cluster_occupancy without a GPU"
  else echo "FAIL cluster_occupancy without a GPU: exit $rc"; cat "$work/err"; fails=$((fails+1)); fi
fi

echo "cli contract: $fails failed"
[ "$fails" = 0 ]
