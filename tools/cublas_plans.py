#!/usr/bin/env python3
"""Name each GEMM row's plan after the cuBLAS kernel that ran it.

Reads a tpsim measurement file whose GEMM rows carry the kernel cuBLAS ran ("kernel", as
tools/torch_thin_gemm_bench.py and torch_op_bench.py record it) and writes the same file with
a "plan" on every row whose kernel is one of cuBLAS 12.8+/13's nvjet kernels, or the cuBLASLt
algorithm `tpsim microbench` records ("cuBLASLt algo 66, tile 64x80, split-K 1, stages
64xAUTO, cluster 1x4x1, ..."), so tpsim prices the tile, split-K and (from cuBLASLt's record)
thread-block cluster cuBLAS chose instead of choosing its own:

    nvjet_sm90_tst_<N>x<M>_<K>x<stages>_<cluster>_..._[splitK_]<layout>

nvjet names its tile in cuBLAS's column-major terms: for a row-major x @ w.t() (nn.Linear),
the first number is the tile's columns of the output (N), the second its rows (M). A split
kernel's name does not give its slices; its grid did when the H100's sweep was run (as many
slices as fill one wave of the SMs, each at least gemm.library_split's min_slice deep), and so
does this tool, with the SM count and min_slice of the hardware model the rows ran on. Rows
without an nvjet kernel are copied as they are.

    tools/cublas_plans.py IN.json -o OUT.json [--hardware h100_sxm]
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile

NVJET = re.compile(r"nvjet_sm\d+_q*tst_(\d+)x(\d+)_(\d+)x\d+_\d+x\d+_[hv]_bz_(\S*)")


# What tpsim microbench records of the algorithm cuBLASLt's heuristic gave (its config: the
# tile in the output's rows x columns, the split-K slices, the stages' K depth).
LT_CONFIG = re.compile(r"cuBLASLt algo \d+, tile (\d+)x(\d+), split-K (\d+), stages (\d+)x")
LT_CLUSTER = re.compile(r"cluster (\d+)x(\d+)x1\b")


def plan_of(row, sms, min_slice):
    """The plan the row's kernel names (an nvjet kernel, or a cuBLASLt config), or None."""
    config = LT_CONFIG.search(row.get("kernel", ""))
    if config:
        tile_m, tile_n, split, tile_k = (int(g) for g in config.groups())
        plan = {"tile": f"{tile_m}x{tile_n}x{tile_k}"}
        if split > 1:
            plan["split_k"] = split
        cluster = LT_CLUSTER.search(row["kernel"])
        if cluster and row.get("cluster") is None:
            plan["cluster"] = f"{cluster.group(1)}x{cluster.group(2)}"  # in the tile's terms: CTAs along rows x columns
        return plan
    match = NVJET.search(row.get("kernel", ""))
    if not match:
        return None
    tile_n, tile_m, tile_k, rest = int(match.group(1)), int(match.group(2)), int(match.group(3)), match.group(4)
    plan = {"tile": f"{tile_m}x{tile_n}x{tile_k}"}
    if "splitK" in rest.split("_"):
        tiles = math.ceil(row["m"] / tile_m) * math.ceil(row["n"] / tile_n)
        plan["split_k"] = max(2, min(sms // tiles, row["k"] // min_slice))
    return plan


MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")


def model_value(name, path, depth=0):
    """A hardware model's quantity at `path` (keys), following its "base" as tpsim does."""
    file = name if name.endswith(".json") else os.path.join(MODELS, name + ".json")
    with open(file) as f:
        doc = json.load(f)
    node = doc
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and isinstance(node.get("value"), (int, float)):
        return node["value"]
    if "base" in doc and depth < 8:
        base = doc["base"]
        if base.endswith(".json"):
            base = os.path.join(os.path.dirname(os.path.abspath(file)), base)
        return model_value(base, path, depth + 1)
    raise KeyError("/".join(path))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--hardware", default="h100_sxm", help="the model (name in models/ or path) whose SMs and min_slice a split fills")
    args = ap.parse_args(argv)
    try:
        sms = int(model_value(args.hardware, ["sm", "count"]))
        min_slice = int(model_value(args.hardware, ["gemm", "library_split", "min_slice"]))
    except (OSError, ValueError, KeyError) as e:
        print(f"cublas_plans.py: --hardware {args.hardware}: no SM count and gemm.library_split.min_slice there ({e}); nothing written",
              file=sys.stderr)
        return 2
    try:
        with open(args.input) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"cublas_plans.py: {args.input}: cannot read it as JSON ({e}); nothing written", file=sys.stderr)
        return 2
    rows = doc.get("measurements") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        print(f"cublas_plans.py: {args.input}: $.measurements: not a tpsim measurement file; nothing written", file=sys.stderr)
        return 2
    named = 0
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or row.get("kind") != "gemm" or row.get("batch", 1) != 1 or row.get("grouped"):
            continue
        if not all(isinstance(row.get(d), int) and row[d] > 0 for d in ("m", "n", "k")):
            print(f"cublas_plans.py: {args.input}: $.measurements[{i}]: a GEMM row needs positive whole m, n and k; "
                  "nothing written", file=sys.stderr)
            return 2
        plan = plan_of(row, sms, min_slice)
        if plan:
            row["plan"] = plan
            named += 1
    # Written whole or not at all.
    out_dir = os.path.dirname(os.path.abspath(args.output))
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".cublas_plans.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.output)
    except BaseException:
        os.unlink(tmp)
        raise
    print(f"{args.output}: {named} GEMM rows name cuBLAS's plan", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
