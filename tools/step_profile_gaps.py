#!/usr/bin/env python3
"""The device-side gap between consecutive GPU ops of profiled training steps.

Reads what tools/torch_train_step_bench.py wrote (one step's kernels, copies and memsets in
launch order, each tagged with the segment it ran in) and reports how long the GPU sat between
one op's end and the next one's start. The step was queued behind a long GPU sleep, so the host
was ahead and these gaps are the GPU's own: the launch gap between two different kernels, which
is what `launch.device_latency` means in a hardware model. Only forward and backward count (the
optimizer's foreach launches repeat one kernel and are reported apart); a gap below 0 (ops of two
streams overlapping) or above 30 us (a stream waiting on another's work) is no launch gap and is
left out, and counted.

    python3 tools/step_profile_gaps.py models/measurements/step_profiles/h100_sxm_*.json.gz
"""
import argparse
import gzip
import statistics
import sys

from step_profile_kernels import load  # the step profiles' reader beside this file

MAX_GAP_US = 30.0


def quantile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def gaps(profile, path):
    """(forward/backward gaps, optimizer gaps, gaps left out) of one profile, in us."""
    kernels = profile.get("kernels") if isinstance(profile, dict) else None
    if not isinstance(kernels, list) or profile.get("format") != "tpsim-step-profile":
        raise ValueError(f"{path}: not a step profile of tools/torch_train_step_bench.py (format tpsim-step-profile with kernels)")
    layers, optimizer, dropped = [], [], 0
    for i, (a, b) in enumerate(zip(kernels, kernels[1:])):
        try:
            segment, start, duration, next_start = str(a[0]), float(a[2]), float(a[3]), float(b[2])
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"{path}: kernels[{i}]: expected [segment, name, start_us, duration_us]") from None
        gap = next_start - (start + duration)
        if gap < 0 or gap > MAX_GAP_US:
            dropped += 1
        elif segment.startswith("optimizer"):
            optimizer.append(gap)
        else:
            layers.append(gap)
    return layers, optimizer, dropped


def describe(values):
    s = sorted(values)
    return (f"{len(s)} gaps, median {statistics.median(s):.2f} us (p25 {quantile(s, 0.25):.2f}, "
            f"p75 {quantile(s, 0.75):.2f}, mean {statistics.mean(s):.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+", help="step profiles (.json or .json.gz)")
    a = ap.parse_args()
    pooled, pooled_optimizer = [], []
    try:
        for path in a.profiles:
            try:
                profile = load(path)
            except (ValueError, EOFError, gzip.BadGzipFile) as e:  # json.JSONDecodeError is a ValueError
                raise ValueError(f"{path}: not JSON ({e})") from None
            layers, optimizer, dropped = gaps(profile, path)
            if not layers:
                raise ValueError(f"{path}: no forward or backward gap to measure")
            print(f"{path}: forward and backward {describe(layers)}; {dropped} left out")
            pooled += layers
            pooled_optimizer += optimizer
    except (OSError, ValueError) as e:
        print(f"step_profile_gaps: {e}", file=sys.stderr)
        return 2
    if pooled_optimizer:
        print(f"optimizer (one foreach kernel launched again and again): {describe(pooled_optimizer)}")
    print(f"all forward and backward: {describe(pooled)}")
    print(f"median: {statistics.median(pooled):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
