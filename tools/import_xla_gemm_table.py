#!/usr/bin/env python3
"""Turns XLA's measured GEMM throughput table into a tpsim measurement file.

XLA keeps measured matmul throughputs per GPU in
xla/service/gpu/model/matmul_interpolator_data.h (a textproto: per key such as
"sm_90", entries of b, m, n, k and FLOP/s per dtype combination). This takes
every entry of one key for the dtypes tpsim models and writes one "gemm"
measurement per shape and dtype, with the source on every row; a batched entry
(b > 1) becomes a measurement with "batch": b (a strided batched GEMM).

  tools/import_xla_gemm_table.py matmul_interpolator_data.h --key sm_90 \
      --source "openxla/xla ... (commit, date)" -o models/measurements/xla_h100_gemm.json

Every row says "clock": "burst". XLA's table generator (openxla/xla
xla/tools/matmul_perf_table_gen.cc, MatmulPerfTableGen::Profile) compiles each
shape, runs it once to warm up, then traces 5 x (small, large arguments) with
CUPTI and keeps the median kernel time: a dozen calls between compilations,
over before a power limit's averaging lowers the clock.

f32 rows are left out: XLA's default precision lets f32 dots run as TF32 on
tensor cores, which is not the FFMA path tpsim's fp32 models. fp8 rows are left
out too: in the sm_90 table six of them exceed H100's dense fp8 peak (4096^3 at
2424 TFLOP/s against 1979), so they are not the dense fp8 GEMM tpsim models.
"""
import argparse
import json
import re
import sys

from torch_op_bench import write_atomic  # the op bench beside this file: the whole file or none of it

DTYPES = {"bf16xbf16->bf16": "bf16"}


def entries_of(text, key):
    start = text.find(f'key: "{key}"')
    if start < 0:
        sys.exit(f"import_xla_gemm_table: no key \"{key}\" in the table")
    # The next GPU's key: in the header's embedded textproto and in the .txtpb alike, a key
    # line followed by its value block.
    nxt = re.search(r'\n\s*key: "[^"]+"\s*\n\s*value \{', text[start + 1:])
    section = text[start: start + 1 + nxt.start()] if nxt else text[start:]
    pattern = r'entries \{\s*b: (\d+)\s*m: (\d+)\s*n: (\d+)\s*k: (\d+)\s*((?:flops \{[^}]*\}\s*)+)\}'
    for b, m, n, k, flops in re.findall(pattern, section):
        yield int(b), int(m), int(n), int(k), dict(re.findall(r'key: "([^"]+)" value: (\d+)', flops))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--key", default="sm_90")
    ap.add_argument("--hardware", default="h100_sxm")
    ap.add_argument("--source", required=True, help="where the table comes from (repository, commit, date)")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    rows = []
    for b, m, n, k, flops in entries_of(open(a.table).read(), a.key):
        for combo, dtype in DTYPES.items():
            if combo in flops:
                row = {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": dtype}
                if b != 1:
                    row["batch"] = b
                row["tflops"] = round(int(flops[combo]) / 1e12, 2)
                row["clock"] = "burst"
                row["source"] = f"{a.source}, key {a.key}, {combo}"
                rows.append(row)
    if not rows:
        sys.exit("import_xla_gemm_table: no unbatched rows found")
    doc = {"format": "tpsim-measurements", "hardware": a.hardware,
           "description": f"{len(rows)} GEMMs measured by XLA's team (the bf16 entries of key {a.key}, batched ones "
                          "with their batch count), "
                          "written by tools/import_xla_gemm_table.py. Each is the median kernel time of a dozen calls "
                          "between compilations (xla/tools/matmul_perf_table_gen.cc): a burst, at the clock ceiling. "
                          "Op-level: fit to them, cross-validate on them.",
           "measurements": rows}
    write_atomic(a.output, json.dumps(doc, indent=2) + "\n")
    print(f"{a.output}: {len(rows)} measurements")


if __name__ == "__main__":
    main()
