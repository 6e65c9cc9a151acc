#!/usr/bin/env python3
"""The GEMM model's error grouped by the kernel that ran: its thread-block cluster and the weight's size.

Joins a measurement file whose GEMM rows carry the kernel cuBLAS ran (an nvjet kernel name, as
tools/torch_thin_gemm_bench.py records it, or the cuBLASLt algorithm `tpsim microbench` records)
with the rows `tpsim validate --json` wrote for it, by row name, and prints mean |error| and
bias per dtype, cluster size (CTAs) and weight size (under or over --weight-mb):

    tools/cublas_plans.py thin.json -o planned.json
    tools/tpsim validate --hardware h100_sxm planned.json --json rows.json
    tools/errors_by_kernel.py planned.json rows.json

nvjet names its cluster after the tile (`..._64x16_4x2_...`: 4 x 2 CTAs), cuBLASLt's record
as `cluster 2x4x1`; a kernel naming no cluster is left out and counted.
"""
import argparse
import collections
import json
import re
import sys

NVJET_CLUSTER = re.compile(r"nvjet_sm\d+_q*tst_\d+x\d+_\d+x\d+_(\d+)x(\d+)_")
LT_CLUSTER = re.compile(r"cluster (\d+)x(\d+)x(\d+)")
BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def cluster_ctas(kernel):
    """CTAs in the kernel's thread-block cluster, or None where it names none."""
    m = NVJET_CLUSTER.search(kernel) or LT_CLUSTER.search(kernel)
    if not m:
        return None
    n = 1
    for g in m.groups():
        n *= int(g)
    return n


def load(path):
    """The file's JSON, or None (said on one line) where it cannot be read."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"errors_by_kernel.py: {path}: cannot read it as JSON ({e})", file=sys.stderr)
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("measurements", help="the measurement file (rows with `kernel`)")
    ap.add_argument("rows", help="tpsim validate --json output for that file")
    ap.add_argument("--weight-mb", type=float, default=40.0, help="weights under this many MB form their own group (default 40)")
    args = ap.parse_args(argv)
    doc = load(args.measurements)
    rows = load(args.rows) if doc is not None else None
    if doc is None or rows is None:
        return 2
    measured = doc.get("measurements") if isinstance(doc, dict) else None
    predicted = rows.get("rows") if isinstance(rows, dict) else None
    if not isinstance(measured, list) or not isinstance(predicted, list):
        print(f"errors_by_kernel.py: $.measurements of {args.measurements} and $.rows of {args.rows} must be lists", file=sys.stderr)
        return 2
    by_name = {r.get("name"): r for r in predicted if isinstance(r, dict)}
    groups = collections.defaultdict(list)
    no_cluster = unmatched = 0
    for i, row in enumerate(measured):
        if not isinstance(row, dict) or row.get("kind") != "gemm":
            continue
        name = row.get("name")
        got = by_name.get(name)
        if not got or not got.get("measured_us"):
            unmatched += 1
            continue
        ctas = cluster_ctas(row.get("kernel", ""))
        if ctas is None:
            no_cluster += 1
            continue
        try:
            weight_mb = row["n"] * row["k"] * BYTES[row["dtype"]] / 1e6
        except (KeyError, TypeError):
            print(f"errors_by_kernel.py: {args.measurements}: $.measurements[{i}]: a GEMM row needs n, k and a dtype", file=sys.stderr)
            return 2
        error = got["predicted_us"] / got["measured_us"] - 1
        heavy = weight_mb >= args.weight_mb
        groups[(row["dtype"], ctas, heavy)].append(error)
    print(f"{'dtype':6} {'cluster':>7} {'weight':>12} {'rows':>5} {'mean |err|':>11} {'bias':>8}")
    for (dtype, ctas, heavy) in sorted(groups):
        errs = groups[(dtype, ctas, heavy)]
        mean = sum(abs(e) for e in errs) / len(errs)
        bias = sum(errs) / len(errs)
        label = f"{'>=' if heavy else '<'} {args.weight_mb:g} MB"
        print(f"{dtype:6} {ctas:>7} {label:>12} {len(errs):>5} {mean * 100:>10.1f}% {bias * 100:>+7.1f}%")
    if no_cluster or unmatched:
        print(f"left out: {no_cluster} GEMM row(s) whose kernel names no cluster, {unmatched} without a validated row of that name")
    return 0


if __name__ == "__main__":
    sys.exit(main())
