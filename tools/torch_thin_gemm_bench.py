#!/usr/bin/env python3
"""Which kernel cuBLAS runs for thin, deep GEMMs on one GPU, and what each of its kernels takes.

Async TP cuts a GEMM into per-shard submatmuls: a few hundred rows against a whole weight. tpsim's
planner picks the tile and split-K that it predicts fastest; cuBLAS's heuristic picks its own, and
on thin deep-K shapes it splits K and runs a reduction kernel after the GEMM. This sweeps those
shapes (64-1,536 rows, N 1,280-8,192, K 4,096-28,672, bf16 through torch.mm and fp8 through
torch._scaled_mm) and keeps, per shape, every kernel a call ran with its median device time (the
profiler's CUPTI records), so a model of cuBLAS's choice and of its split-K fix-up can be fitted and
checked op by op.

Writes two files, atomically, after every few shapes (a run cut short keeps what it measured):
  -o FILE          a tpsim measurement file (kind gemm; a call's kernels summed, as the op bench does)
  --kernels FILE   per shape: each kernel's name, count per call, median us and launch grid (the grid
                   over the tiles the name gives is cuBLAS's split-K count)

    python3 tools/torch_thin_gemm_bench.py --hardware h100_sxm -o thin.json --kernels thin_kernels.json [--flush clean]

--flush: none (back to back, as chunk GEMMs against one weight run), dirty (after the op bench's fill of
a buffer 4x L2) or clean (after a read of it), each pass left out of the timing.

Needs PyTorch with CUDA and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import sys
import time

from torch_op_bench import Bench, import_torch_with_cuda, kernels_by_name, write_atomic  # the op bench beside this file

BF16_M = (64, 128, 192, 256, 384, 512, 768, 1024, 1536)
BF16_NK = [(n, k) for n in (1280, 3584, 4096, 6656, 8192) for k in (4096, 8192, 14336, 16384, 28672)]
FP8_M = (128, 256, 512, 768, 1024, 1536)
FP8_NK = [(n, k) for n in (1280, 4096, 6656) for k in (8192, 16384)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="tpsim measurement file to write (atomically)")
    p.add_argument("--kernels", required=True, help="per-kernel JSON to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, h200, ...)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--settle", type=float, default=0.05, help="seconds of back-to-back calls before timing")
    p.add_argument("--quick", action="store_true", help="three shapes of each dtype (a smoke test)")
    p.add_argument("--flush", choices=("none", "dirty", "clean"), default="none",
                   help="before each call, push the operands out of L2 by writing (dirty: fill_, which leaves dirty "
                        "lines the GEMM's reads must first write back) or by reading (clean: a sum, which leaves clean lines) a "
                        "buffer 4x L2 (that kernel not timed), so the weight comes from HBM even where it would fit "
                        "in L2; default none: back-to-back calls, as chunk GEMMs against one weight run")
    return p.parse_args()


def shapes(quick):
    out = [("bf16", m, n, k) for (n, k) in BF16_NK for m in BF16_M]
    out += [("fp8", m, n, k) for (n, k) in FP8_NK for m in FP8_M]
    if quick:
        out = out[:3] + [s for s in out if s[0] == "fp8"][:3]
    return out


def flushed(b, torch, op, how):
    """op after a pass over a buffer 4x L2: the op bench's fill (dirty) or a read-only sum (clean)."""
    if how == "dirty":
        return b.flushed(op)
    # bf16 rows of 4,096 summed along the row: a read-only pass (no up-cast copy, as a uint8 sum would
    # make) whose per-row outputs need no cross-block semaphores (no memset) and write next to nothing.
    if not hasattr(b, "clean_buffer"):
        rows = 4 * torch.cuda.get_device_properties(0).L2_cache_size // (2 * 4096)
        b.clean_buffer = torch.ones(rows, 4096, device="cuda", dtype=torch.bfloat16)

    def fn():
        b.clean_buffer.sum(dim=1)
        op()
    return fn


def timed_kernel(name):
    """Not a flush kernel: no ATen kernel (the fill, the sum) runs inside torch.mm or torch._scaled_mm,
    whose kernels are cuBLAS's own (its split-K reduction and workspace memset stay)."""
    return "at::native" not in name


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_thin_gemm_bench")
    if torch is None:
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    b = Bench(torch, args)
    gpu = torch.cuda.get_device_name()
    src = (f"this file's run ({gpu}; torch {torch.__version__}, CUDA {torch.version.cuda}): eager {{op}}, x [m,k] @ w[n,k].t() "
           f"as nn.Linear lays it out, random normal data, {{l2}}, CUPTI kernel time (a call's kernels summed), "
           f"median of {args.repeat}")
    details = []
    l2 = {"none": "not flushed from L2 (back-to-back calls)", "dirty": "L2 overwritten (a fill) before each call",
          "clean": "L2 refilled with clean lines (a read-only sum) before each call"}[args.flush]

    def save():
        description = (f"Thin deep-K GEMMs on one {gpu} by tools/torch_thin_gemm_bench.py --flush {args.flush}: cuBLAS's own "
                       f"kernel choice (\"kernel\"; split-K's reduction counted in the time), {l2}, each shape timed after "
                       f"{args.settle} s of back-to-back calls.")
        b.write(args.output, args.hardware, description)
        write_atomic(args.kernels, json.dumps({"gpu": gpu, "torch": torch.__version__, "shapes": details}, indent=1) + "\n")

    t0 = time.time()
    one = torch.tensor(1.0, device="cuda")
    for i, (dtype, m, n, k) in enumerate(shapes(args.quick)):
        name = f"gemm {m}x{n}x{k} {dtype}"
        try:
            if dtype == "fp8":
                x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
                w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
                fn = (lambda x=x, w=w: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                op = "torch._scaled_mm (tensor-wise scales, use_fast_accum off)"
            else:
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
                fn = (lambda x=x, w=w: torch.mm(x, w.t()))
                op = "torch.mm"
            if args.flush != "none":
                fn = flushed(b, torch, fn, args.flush)
            ks = [kern for kern in b.kernels(fn, args.repeat, grids=True) if timed_kernel(kern[0])]
            details.append({"dtype": dtype, "m": m, "n": n, "k": k, "kernels": kernels_by_name(ks, args.repeat)})
        except Exception as e:  # one bad shape must not lose the others
            b.failed.append({"name": name, "error": str(e)[:300]})
            print(f"  FAILED {name}: {str(e)[:200]}", flush=True)
            continue
        row = {"kind": "gemm", "name": name, "m": m, "n": n, "k": k, "dtype": dtype, "source": src.format(op=op, l2=l2)}
        if args.flush != "none":
            row["l2"] = args.flush  # the L2 the GEMM finds (tpsim prices its dirty lines' write-back)
        b.add(row, fn, recorded=[kern[:3] for kern in ks])
        del x, w
        if i % 20 == 19:
            save()
    save()
    print(f"wrote {len(b.rows)} rows to {args.output} ({len(b.failed)} failed) in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
