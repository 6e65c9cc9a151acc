#!/usr/bin/env python3
"""How fast copy-engine copies run beside GEMMs on one GPU: a test of how HBM is shared.

tpsim lets link and copy-engine traffic draw on HBM first and gives the SMs what is left. Async
TP's all-gather pulls each shard with a copy engine while the other stream's submatmul streams a
weight from HBM; if the engine got much less than its share there, the pulls would be late (README,
"Where the decomposed path's time goes missing"). Peer pulls need two GPUs; this asks the same of
the engines one GPU has. Each copy (host to device and device to host through pinned memory, and a
same-device copy_, whose engine the profiler names: a `gpu_memcpy` event, not a kernel) is timed
alone and beside a back-to-back run of one GEMM on another stream: a weight-streaming one (128 x
6656 x 16384, kraken's shard: it draws nearly all the HBM) and one bound by its tensor cores
(8192^3). Each GEMM's time is taken alone and beside the copy too.

Output (JSON, written atomically): per copy and GEMM, the copy's GB/s alone and beside, the GEMM's
time alone and beside, and the copy's engine as the profiler saw it. Op-level: each number is one
copy's or one kernel's time. Not a tpsim measurement file: tpsim does not model host copies.

    python3 tools/torch_copy_beside_gemm_bench.py -o copy_beside_gemm.json

Needs PyTorch with CUDA and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import statistics
import sys

from torch_op_bench import import_torch_with_cuda, write_atomic  # the op bench beside this file: the same helpers

GEMMS = {"weight_streaming": (128, 6656, 16384), "compute_bound": (8192, 8192, 8192)}  # m, n, k
COPY_BYTES = 256 * 1024 * 1024


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="JSON file to write (atomically)")
    p.add_argument("--repeats", type=int, default=10)
    return p.parse_args()


def timed(torch, stream, fn, repeats):
    """Median CUDA-event time (us) of fn() issued on `stream`, after one untimed call."""
    times = []
    for i in range(repeats + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record()
            fn()
            end.record()
        end.synchronize()
        if i > 0:
            times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def engine_of(torch, fn):
    """What the profiler saw fn() run as: a host copy's memcpy ("Memcpy HtoD ...", a copy engine), a
    same-device memcpy ("Memcpy DtoD": the profiler does not say what runs it; beside a GEMM it
    behaves as a kernel waiting for SMs), or a kernel."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    if any(n.startswith("Memcpy DtoD") for n in names):
        return "memcpy DtoD"
    return "copy engine" if any(n.startswith("Memcpy") for n in names) else "kernel"


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_copy_beside_gemm_bench")
    if torch is None:
        return 3
    dev = torch.device("cuda")
    elems = COPY_BYTES // 2
    host_src = torch.empty(elems, dtype=torch.bfloat16, pin_memory=True)
    host_dst = torch.empty(elems, dtype=torch.bfloat16, pin_memory=True)
    dev_src = torch.randn(elems, device=dev, dtype=torch.bfloat16)
    dev_dst = torch.empty(elems, device=dev, dtype=torch.bfloat16)
    copies = {
        "host_to_device": lambda: dev_dst.copy_(host_src, non_blocking=True),
        "device_to_host": lambda: host_dst.copy_(dev_src, non_blocking=True),
        "device_to_device": lambda: dev_dst.copy_(dev_src),
    }
    copy_stream, gemm_stream = torch.cuda.Stream(), torch.cuda.Stream()
    rows = []
    for gname, (m, n, k) in GEMMS.items():
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        one_gemm = lambda: torch.mm(a, w.t())  # noqa: E731  x [m,k] @ w[n,k].t(), as nn.Linear lays it out
        gemm_us = timed(torch, gemm_stream, one_gemm, args.repeats)
        for cname, copy in copies.items():
            copy_us = timed(torch, copy_stream, copy, args.repeats)
            # Enough GEMMs back to back to outlast the copy twice over, queued before it starts.
            calls = max(2, int(2 * copy_us / gemm_us) + 1)

            def gemms():
                for _ in range(calls):
                    one_gemm()

            beside_copy, beside_gemm = [], []
            for i in range(args.repeats + 1):
                g0, g1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                c0, c1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                with torch.cuda.stream(gemm_stream):
                    g0.record()
                    gemms()
                    g1.record()
                with torch.cuda.stream(copy_stream):
                    c0.record()
                    copy()
                    c1.record()
                torch.cuda.synchronize()
                if i > 0:
                    beside_copy.append(c0.elapsed_time(c1) * 1e3)
                    beside_gemm.append(g0.elapsed_time(g1) * 1e3 / calls)
            copy_beside_us = statistics.median(beside_copy)
            rows.append({
                "copy": cname, "engine": engine_of(torch, copy), "bytes": COPY_BYTES,
                "gemm": gname, "m": m, "n": n, "k": k,
                "copy_alone_gbps": round(COPY_BYTES / copy_us / 1e3, 1),
                "copy_beside_gemm_gbps": round(COPY_BYTES / copy_beside_us / 1e3, 1),
                "gemm_alone_us": round(gemm_us, 2),
                "gemm_beside_copy_us": round(statistics.median(beside_gemm), 2),
            })
            print(f"{cname:17s} beside {gname:16s} copy {rows[-1]['copy_alone_gbps']:7.1f} -> "
                  f"{rows[-1]['copy_beside_gemm_gbps']:7.1f} GB/s, gemm {gemm_us:8.1f} -> {rows[-1]['gemm_beside_copy_us']:8.1f} us "
                  f"({rows[-1]['engine']})")
    doc = {"description": f"copies beside GEMMs on one {torch.cuda.get_device_name()} (torch {torch.__version__}): "
                          "each copy's GB/s alone and while a GEMM runs back to back on another stream, each GEMM's "
                          f"time alone and beside the copy (the mean of a run, which outlasts the copy); CUDA events, "
                          f"median of {args.repeats}", "rows": rows}
    write_atomic(args.output, json.dumps(doc, indent=1) + "\n")
    print(f"{args.output}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
