#!/usr/bin/env python3
"""PyTorch's TP ops on a process group of one GPU, timed as meta-pytorch/kraken times them.

Runs NCCL + cuBLAS (torch.matmul then reduce_scatter_tensor; all_gather_tensor then
torch.matmul) and symmetric-memory async TP (symm_mem.fused_matmul_reduce_scatter,
fused_all_gather_matmul) with world size 1, and writes the timings as a tpsim measurement file
of whole-op `scenario` rows with "gpus": 1. Whole ops: for `tpsim validate` only, never a fit.

Timing follows kraken/_logging/benchmarking.py benchmark_with_event (kraken 1cb1314): 200
warm-up calls, a 2e7-cycle sleep on the GPU, then 25 x (overwrite a 256 MB buffer, begin event,
call, end event), the median. The sleep keeps the GPU behind the host only while the host issues
a call in under ~10 ms / 25 = 400 us; where it does not, a span times the host. The host's issue
time per call goes into the file's description; --sleep-cycles 2e8 leaves it 4 ms a call. It
answers one question about kraken PR 18, whose benchmark script says `--nproc-per-node 1` in its
help text: do its fp32 rows look like a one-GPU run?

    python3 tools/torch_tp_one_rank_bench.py --hardware h100_sxm -o one_rank.json

Needs PyTorch with CUDA, NCCL and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import sys

from torch_op_bench import init_one_gpu_group, kraken_bench, write_measurements  # the op bench beside this file


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="measurement file to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, ...)")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--iters", type=int, default=25)
    p.add_argument("--sleep-cycles", type=float, default=2e7,
                   help="GPU sleep before the timed calls (kraken: 2e7, ~10 ms): the host must issue all the "
                        "calls within it, or the later spans time the host instead of the GPU")
    return p.parse_args()


# (op, dtype, M, N, K) in kraken's (M, N, K): A is [M, K], B is [K, N].
CASES = [("matmul_reducescatter", "fp32", 128, 6656, k) for k in (4096, 8192, 16384, 32768)]
CASES += [("matmul_reducescatter", "fp32", 256, 6656, k) for k in (4096, 8192, 16384)]
CASES += [("matmul_reducescatter", "bf16", m, 4096, 14336) for m in (512, 2048)]
CASES += [("allgather_matmul", "bf16", m, 6656, k) for m in (128, 1024) for k in (4096, 16384)]


def main():
    args = parse_args()
    try:
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
        from torch.distributed._functional_collectives import all_gather_tensor, reduce_scatter_tensor, wait_tensor
    except ImportError as e:
        print(f"torch_tp_one_rank_bench: PyTorch is not usable here ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_tp_one_rank_bench: no CUDA GPU", file=sys.stderr)
        return 3
    group = init_one_gpu_group(torch, dist, 29517)
    torch.backends.cuda.matmul.allow_tf32 = False  # kraken's fp32 rows: torch's default, no TF32
    cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}

    def bench(fn):
        return kraken_bench(torch, fn, args.warmup, args.iters, args.sleep_cycles, cache)

    def kernels(fn):  # what one call runs on the GPU, for the file's description
        fn()
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            fn()
            torch.cuda.synchronize()
        on_gpu = [e for e in prof.events() if str(e.device_type).endswith("CUDA")]
        return [(e.name[:60], round(e.device_time, 1)) for e in on_gpu][:12]

    rows, seen, failed, host = [], {}, [], {}
    props = torch.cuda.get_device_properties(0)

    def save():
        write_measurements(args.output, args.hardware,
                           (f"Whole TP ops on a process group of one {props.name}, torch {torch.__version__}, "
                            f"CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
                            f"by tools/torch_tp_one_rank_bench.py (kraken's benchmark_with_event, a GPU sleep of "
                            f"{args.sleep_cycles:.0e} cycles before {args.iters} calls). Validation only: never fit a model "
                            f"to these. Host issue time per call (us; spans time the host where {args.iters} of these "
                            f"outlast the sleep): {json.dumps(host)}. Kernels of one call: {json.dumps(seen)}. "
                            f"Failed: {json.dumps(failed)}"),
                           rows)

    for op, dt, m, n, k in CASES:
        a = symm_mem.empty((m, k), dtype=dtypes[dt], device="cuda").normal_()
        symm_mem.rendezvous(a, group)
        b = torch.randn((k, n), device="cuda", dtype=dtypes[dt]).T.contiguous().T
        if op == "matmul_reducescatter":
            base = lambda: wait_tensor(reduce_scatter_tensor(torch.matmul(a, b), "sum", scatter_dim=0, group=dist.group.WORLD))
            fused = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", scatter_dim=0, group_name=group)
        else:
            base = lambda: torch.matmul(wait_tensor(all_gather_tensor(a, 0, dist.group.WORLD)), b)
            fused = lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=group)
        name = f"one-GPU {op} {m}x{k}x{n} {dt}"
        scenario = {"name": name, "gpus": 1, "dtype": dt, "software": {"op_issue": "enqueued", "l2": "dirty"},
                    "workload": {"op": op, "m": m, "k": k, "n": n}}
        for variant, fn in (("baseline", base), ("async_tp", fused)):
            try:
                if not rows and not failed:
                    bench(fn)  # the run's first timed loop pays one-time host costs (4.6 ms a call seen): not a row
                t, h = bench(fn)
                host[f"{name} {variant}"] = round(h, 1)
            except Exception as e:  # keep what was measured, say what failed
                failed.append(f"{name} {variant}: {str(e)[:160]}")
                continue
            rows.append({"kind": "scenario", "scenario": scenario, "variant": variant, "time_us": round(t, 3),
                         "source": "this repository's tools/torch_tp_one_rank_bench.py on one GPU (world size 1), "
                                   f"GPU sleep {args.sleep_cycles:.0e} cycles"})
            key = f"{op} {dt} {variant}"
            if key not in seen:
                seen[key] = kernels(fn)
            print(f"{name} {variant}: {t:.1f} us (host {host[f'{name} {variant}']:.0f} us a call)", flush=True)
        save()
        del a, b
    dist.destroy_process_group()
    print(f"wrote {len(rows)} rows to {args.output} ({len(failed)} failed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
