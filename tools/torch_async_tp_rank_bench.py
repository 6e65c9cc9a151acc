#!/usr/bin/env python3
"""One rank of PyTorch's async TP over G GPUs, emulated on one GPU: where kraken's missing time is.

For each shape, rank 0's side of symm_mem.fused_all_gather_matmul and
fused_matmul_reduce_scatter over a group of G (default 8), issued call for call as
torch/distributed/_symmetric_memory/__init__.py issues them (006b161:
_pipelined_multi_all_gather_and_consume and _pipelined_produce_and_all2all: the two streams
switching every step, the barriers, each step's copy_, the sleep at step 2, the submatmuls into
the output's views, the sum over the stacked partials), except that every peer is this GPU: a
"remote" buffer is the local symmetric buffer and a barrier is one over a group of one, which
waits for nobody. So a call takes what one rank's own work takes, with no GPU to wait for and
no NVLink. Timed as meta-pytorch/kraken times its rows (a 2e7-cycle GPU sleep, then 25 calls),
again after a 2e8-cycle sleep (every span GPU time), with the host's issue time per call, each
step's submatmul alone, and one call's kernels per stream (the profiler, the call queued behind a
GPU sleep so its gaps are the GPU's). It answers, for
kraken's 8-GPU bf16 rows that tpsim predicts too fast (README): does one rank's sequence alone
already take their time (the missing time is on each GPU), or about G x its submatmul (it is
between GPUs, or in the peer copies); and can eager Python issue a call as fast as its GPU work
runs (a host-bound floor).

Writes a tpsim measurement file: each emulated op's GPU time as a scenario row that tpsim
simulates the same way ("workload": {..., "emulated_group": G} on one GPU; validation only, never
fitted) and each submatmul alone as a GEMM row (op-level); --report keeps the rest (the
kraken-timed spans, the host's issue times, one call's kernels per stream).

    python3 tools/torch_async_tp_rank_bench.py --hardware h100_sxm -o rank.json --report rank_report.json

Needs PyTorch with CUDA, NCCL and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import sys

from torch_op_bench import (gpu_events, import_torch_with_cuda, init_one_gpu_group, kraken_bench,  # the op bench beside this file
                            write_atomic, write_measurements)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="measurement file to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, h200, ...)")
    p.add_argument("--report", help="also write the kraken-timed spans, host issue times and kernels per stream here")
    p.add_argument("--group-size", type=int, default=8, help="the TP group one rank of which is emulated (default 8)")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--iters", type=int, default=25)
    p.add_argument("--sleep-cycles", type=float, default=2e7, help="kraken's GPU sleep before the timed calls (2e7)")
    p.add_argument("--long-sleep-cycles", type=float, default=2e8, help="a sleep long enough that every span is GPU time")
    p.add_argument("--quick", action="store_true", help="two shapes (a smoke test)")
    args = p.parse_args()
    if not 2 <= args.group_size <= 64:
        p.error("--group-size: 2 to 64")
    return args


# (op, rows, k, n) as tpsim's workloads name them: m is the whole op's rows (the gathered rows, or
# A's rows on every rank), k the contraction, n the weight's columns. Kraken PR 2 (all-gather ->
# matmul, shards of 128-512 rows), PR 19 (matmul -> reduce-scatter), PyTorch PR 143160.
def cases(g, quick):
    out = [("allgather_matmul", rows * g, k, 6656) for rows in (128, 256, 512) for k in (4096, 8192, 16384)]
    out += [("matmul_reducescatter", m, 14336, 4096) for m in (512, 1024, 2048)]
    out += [("allgather_matmul", 256 * g, 8192, 3584)]
    return [out[2], out[9]] if quick else out


def kernels_of_one_call(torch, fn, sleep_cycles):
    """One call's GPU work from the profiler: per stream, [name, start us, duration us] from the
    call's first kernel, and the call's span. The call is queued behind a GPU sleep, as the timed
    calls are, so the spans and gaps are the GPU's own, not the profiled host's issue."""
    fn()
    torch.cuda.synchronize()

    def queued():
        torch.cuda._sleep(int(sleep_cycles))
        fn()

    events = sorted(gpu_events(torch, queued, with_cpu=False), key=lambda e: float(e["ts"]))
    if events and "spin_kernel" in events[0]["name"]:
        events = events[1:]  # the sleep (the reduce-scatter's own sleep at step 2 comes later)
    if not events:
        return {}, 0.0
    t0 = min(float(e["ts"]) for e in events)
    span = max(float(e["ts"]) + float(e["dur"]) for e in events) - t0
    streams = {}
    for e in sorted(events, key=lambda e: float(e["ts"])):
        stream = str(e.get("args", {}).get("stream", "?"))
        streams.setdefault(stream, []).append([e["name"][:60], round(float(e["ts"]) - t0, 2), round(float(e["dur"]), 2)])
    return streams, round(span, 2)


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_async_tp_rank_bench")
    if torch is None:
        return 3
    try:
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError as e:
        print(f"torch_async_tp_rank_bench: PyTorch's symmetric memory is not usable here ({e})", file=sys.stderr)
        return 3
    group = init_one_gpu_group(torch, dist, 29518)
    g = args.group_size
    cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
    props = torch.cuda.get_device_properties(0)
    report = {"tool": "tools/torch_async_tp_rank_bench.py", "gpu": props.name, "torch": torch.__version__,
              "cuda": torch.version.cuda, "group_size": g, "sleep_cycles": args.sleep_cycles,
              "long_sleep_cycles": args.long_sleep_cycles, "iters": args.iters,
              "what": "rank 0 of a group of group_size, every peer this GPU, barriers over a group of one; times in us",
              "cases": [], "failed": []}

    rows = []
    source = (f"this repository's tools/torch_async_tp_rank_bench.py on one {props.name} (torch {torch.__version__}, "
              f"CUDA {torch.version.cuda}): CUDA events around each call after a {args.long_sleep_cycles:.0e}-cycle GPU "
              f"sleep, L2 overwritten before each, median of {args.iters}")

    def save():
        write_measurements(args.output, args.hardware,
                           (f"One rank of PyTorch's async TP over a group of {g}, emulated on one {props.name} "
                            f"(every peer this GPU: local buffers, barriers over a group of one), and each step's "
                            f"submatmul alone. The scenario rows are whole decomposed ops: validation only, never "
                            f"fit a model to them; the GEMM rows are op-level. Failed: {json.dumps(report['failed'])}"),
                           rows)
        if args.report:
            write_atomic(args.report, json.dumps(report, indent=1) + "\n")

    for op, m, k, n in cases(g, args.quick):
        name = f"{op} {m}x{k}x{n} bf16 over {g}"
        try:
            fn, sub = (emulated_allgather_matmul if op == "allgather_matmul" else emulated_matmul_reducescatter)(
                torch, symm_mem, group, g, m, k, n)
            kraken_us, host_us = kraken_bench(torch, fn, args.warmup, args.iters, args.sleep_cycles, cache)
            gpu_us, _ = kraken_bench(torch, fn, args.warmup, args.iters, args.long_sleep_cycles, cache)
            sub_us, _ = kraken_bench(torch, sub, args.warmup, args.iters, args.long_sleep_cycles, cache)
            streams, span = kernels_of_one_call(torch, fn, args.long_sleep_cycles)
        except Exception as e:  # keep what was measured, say what failed
            report["failed"].append(f"{name}: {str(e)[:200]}")
            save()
            continue
        scenario = {"name": name, "gpus": 1, "dtype": "bf16", "software": {"op_issue": "enqueued", "clock": "burst", "l2": "dirty"},
                    "workload": {"op": op, "m": m, "k": k, "n": n, "emulated_group": g}}
        rows.append({"kind": "scenario", "scenario": scenario, "variant": "async_tp", "time_us": round(gpu_us, 3),
                     "source": source})
        rows.append({"kind": "gemm", "name": f"gemm {m // g}x{n}x{k} bf16 ({op} step)", "m": m // g, "n": n, "k": k,
                     "dtype": "bf16", "timing": "events", "clock": "burst", "l2": "dirty", "time_us": round(sub_us, 3),
                     "source": source})
        report["cases"].append({"name": name, "op": op, "m": m, "k": k, "n": n, "dtype": "bf16",
                                "kraken_timed": round(kraken_us, 2), "gpu_time": round(gpu_us, 2),
                                "host_issue_per_call": round(host_us, 1), "submatmul_alone": round(sub_us, 2),
                                "group_size_x_submatmul": round(g * sub_us, 2), "profiled_span": span,
                                "kernels_by_stream": streams})
        print(f"{name}: {gpu_us:.1f} us GPU ({kraken_us:.1f} timed as kraken), {g} x submatmul {g * sub_us:.1f}, "
              f"host {host_us:.0f} us a call", flush=True)
        save()
    save()
    dist.destroy_process_group()
    print(f"wrote {len(rows)} rows to {args.output} ({len(report['failed'])} cases failed)")
    return 0


def emulated_allgather_matmul(torch, symm_mem, group, g, m, k, n):
    """_fused_all_gather_matmul_impl -> _pipelined_multi_all_gather_and_consume, rank 0 of g.
    Returns the call and one step's submatmul alone."""
    rows = m // g
    shard = torch.randn((rows, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    gathered = torch.empty((m, k), device="cuda", dtype=torch.bfloat16)
    out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    shards, out_shards = gathered.chunk(g), out.chunk(g)
    cur, backend = torch.cuda.current_stream(), symm_mem._get_backend_stream()
    nbytes = shard.numel() * shard.element_size()

    def call():
        symm = symm_mem.get_symm_mem_workspace(group, min_size=nbytes)
        symm.barrier(channel=0)
        backend.wait_stream(cur)
        local = symm.get_buffer(0, shard.shape, shard.dtype, storage_offset=0)
        local.copy_(shard)
        symm.barrier(channel=1)
        backend.wait_stream(cur)
        torch.matmul(shard, b, out=out_shards[0])
        for step in range(1, g):
            stream = cur if step % 2 == 0 else backend
            remote = symm.get_buffer(0, shard.shape, shard.dtype, storage_offset=0)  # stands for rank `step`'s
            with torch.cuda.stream(stream):
                shards[step].copy_(remote)
                torch.matmul(shards[step], b, out=out_shards[step])
        with torch.cuda.stream(cur if g % 2 == 0 else backend):
            shards[0].copy_(shard)  # return_A: the local shard into the gathered output
        cur.wait_stream(backend)
        symm.barrier(channel=0)

    return call, lambda: torch.matmul(shards[1], b, out=out_shards[1])


def emulated_matmul_reducescatter(torch, symm_mem, group, g, m, k, n):
    """_fused_matmul_reduce_scatter_impl -> _pipelined_produce_and_all2all, then the sum over the
    stacked partials (torch.sum, as before pytorch/pytorch PR 191803), rank 0 of g."""
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    a_shards = a.chunk(g)
    stacked = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)  # the partials, rank-major
    out_chunks = stacked.chunk(g)
    cur, backend = torch.cuda.current_stream(), symm_mem._get_backend_stream()
    chunk = out_chunks[0]
    numel = chunk.numel()
    alone = torch.empty_like(chunk)

    def call():
        symm = symm_mem.get_symm_mem_workspace(group, min_size=numel * chunk.element_size() * 2)
        symm.barrier(channel=0)
        backend.wait_stream(cur)
        bufs = [symm.get_buffer(0, chunk.shape, chunk.dtype, 0), symm.get_buffer(0, chunk.shape, chunk.dtype, numel)]
        for step in range(1, g):
            remote_rank = (0 - step) % g
            stream = cur if step % 2 == 0 else backend
            p2p = bufs[0 if step % 2 else 1]
            remote = symm.get_buffer(0, chunk.shape, chunk.dtype, 0 if step % 2 else numel)  # rank remote_rank's
            with torch.cuda.stream(stream):
                if step == 2:
                    torch.cuda._sleep(100)
                torch.matmul(a_shards[step % g], b, out=p2p)
                symm.barrier(channel=step % 2)
                out_chunks[remote_rank].copy_(remote)
                symm.barrier(channel=step % 2)
        if g == 2:
            torch.cuda._sleep(100)
        torch.matmul(a_shards[0], b, out=out_chunks[0])
        cur.wait_stream(backend)
        symm.barrier(channel=0)
        torch.sum(stacked.view(g, m // g, n), dim=0)

    return call, lambda: torch.matmul(a_shards[1], b, out=alone)


if __name__ == "__main__":
    sys.exit(main())
