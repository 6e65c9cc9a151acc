#!/usr/bin/env python3
"""Fits how a tensor-core GEMM's speed follows the power it may draw (power ~ speed^exponent).

Reads a clock run of tools/torch_gemm_clock_bench.py --duty (one GEMM shape, randn operands,
back to back and alternating with copies of several sizes) and, for every alternation whose
clock stayed below the boost ceiling, takes the GEMM phase's power as the board's average less
the copies' share (the copy alone's draw, weighted by the copies' share of the time):

    P_gemm = (P_avg - (1 - d) P_copy) / d,   d = t_gemm / (t_gemm + t_copy)

then fits ln(t_b2b / t_gemm) = ln(P_gemm / P_b2b) / exponent through the origin (the back-to-back
row is the reference). Prints each row (those at the clock ceiling as a check, not fitted), the
exponent, and the speed it gives a few limits.

  tools/fit_power_exponent.py models/measurements/power/h100_sxm_gemm_clock.json
"""
import argparse
import json
import math


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clock_json")
    ap.add_argument("--shape", default="16384,4096,4096", help="the GEMM whose duty rows to use (m,n,k)")
    ap.add_argument("--ceiling-mhz", type=float, default=1980.0, help="the boost clock: rows at it are not power-bound")
    a = ap.parse_args()
    rows = json.load(open(a.clock_json))["rows"]
    shape = [int(x) for x in a.shape.split(",")]
    copies = [r for r in rows if r.get("kernel") == "copy alone"]
    if not copies:
        raise SystemExit("fit_power_exponent: no 'copy alone' rows")
    copy_us_per_gib = sum(r["us"] / r["copy_gib_between"] for r in copies) / len(copies)
    copy_w = sum(r["power_w"] for r in copies) / len(copies)
    gemm = [r for r in rows if r.get("shape") == shape and r.get("data") == "randn"]
    b2b = [r for r in gemm if r["schedule"] == "back_to_back"]
    if len(b2b) != 1:
        raise SystemExit("fit_power_exponent: need exactly one back-to-back randn row of the shape")
    ref = b2b[0]
    sxy = sxx = 0.0
    print(f"reference: {ref['us']} us back to back at {ref['power_w']} W, {ref['sm_mhz']} MHz; copies {copy_w:.1f} W")
    for r in sorted((r for r in gemm if r["schedule"] == "interleaved"), key=lambda r: r["copy_gib_between"]):
        t_copy = copy_us_per_gib * r["copy_gib_between"]
        d = r["us"] / (r["us"] + t_copy)
        p = (r["power_w"] - (1 - d) * copy_w) / d
        x, y = math.log(p / ref["power_w"]), math.log(ref["us"] / r["us"])
        bound = r["sm_mhz"] < a.ceiling_mhz
        print(f"  copies of {r['copy_gib_between']:>4} GiB: GEMM {r['us']:.1f} us, {d:.3f} of the time, "
              f"{p:.0f} W, speed {ref['us'] / r['us']:.4f} {'(fitted)' if bound else '(at the clock ceiling: check)'}")
        if bound:
            sxy += x * y
            sxx += x * x
    if sxx == 0 or sxy <= 0:
        raise SystemExit("fit_power_exponent: no power-bound rows where more power gave more speed")
    exponent = sxx / sxy
    print(f"exponent: {exponent:.3f} (power ~ speed^exponent)")
    for limit in (700, 600, 500, 400):
        print(f"  a {limit} W limit: speed {min(1.0, (limit / ref['power_w'])) ** (1 / exponent):.4f} of back to back")


if __name__ == "__main__":
    main()
