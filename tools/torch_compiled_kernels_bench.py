#!/usr/bin/env python3
"""What torch.compile's generated (Triton) memory-bound kernels draw from HBM on one GPU, beside
ATen's eager kernels for the same work.

tpsim prices a compiled layer's fused element-wise passes (norms, SiLU * mul, residual adds, fp8
casts) by their bytes at the rate its copy- and ATen-calibrated streaming model gives. The fp8
cast rows (torch_fp8_linear_bench.py) ran slower than that on an H200. This times, at sizes from
16 MiB to 1 GiB of traffic, the same element-wise work compiled (torch.compile, static shapes:
one Triton kernel each) and eager (ATen): a scale (x * 1.5), an add, widening and narrowing casts,
SiLU(a) * b, RMSNorms over rows of 4096 and 8192 (one fused with the residual add before it), and a
sum over rows (dim 0) — each kernel's CUPTI time after
the op bench's L2 overwrite, the median over the repeats.

Writes a tpsim measurement file (kind elementwise: the bytes each op must read and write at
least, the kernel that ran; ops that ran as one kernel, and of the eager ones only ATen's
vectorized streaming kernels) and, with --report, every kernel of every op.

    python3 tools/torch_compiled_kernels_bench.py --hardware h200 -o compiled.json --report compiled_kernels.json

Needs PyTorch with CUDA and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import sys
import time

from torch_op_bench import Bench, import_torch_with_cuda, kernels_by_name, not_flush, write_atomic  # the op bench beside this file


# Eager ops that ATen runs as one vectorized streaming kernel (the others: its cast loop, its reduce
# kernel, or several kernels).
ONE_STREAMING_KERNEL = ("scale", "add", "narrow fp32 -> bf16")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="tpsim measurement file to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, h200, ...)")
    p.add_argument("--report", help="also write every kernel of every op here")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--settle", type=float, default=0.05, help="seconds of back-to-back calls before timing")
    p.add_argument("--quick", action="store_true", help="one size (a smoke test)")
    return p.parse_args()


def ops(torch, elements):
    """(name, fn, inputs, bytes read, bytes written) for `elements` bf16 elements of output."""
    bf16, f32 = torch.bfloat16, torch.float32
    rows, width = elements // 4096, 4096
    x = torch.randn(rows, width, device="cuda", dtype=bf16)
    y = torch.randn(rows, width, device="cuda", dtype=bf16)
    w = torch.randn(width, device="cuda", dtype=bf16)
    x32 = torch.randn(rows, width, device="cuda", dtype=f32)
    e = float(elements)

    def rms(t, wt):
        t32 = t.float()
        return (t32 * torch.rsqrt(t32.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(t) * wt

    def add_rms(t, r, wt):  # a residual add fused with the norm after it: both written
        h = t + r
        return h, rms(h, wt)

    wide = x.view(rows // 2, 2 * width)
    w2 = torch.randn(2 * width, device="cuda", dtype=bf16)

    return [
        ("scale", lambda a: a * 1.5, (x,), 2 * e, 2 * e),
        ("add", lambda a, b: a + b, (x, y), 4 * e, 2 * e),
        ("widen bf16 -> fp32", lambda a: a.float(), (x,), 2 * e, 4 * e),
        ("narrow fp32 -> bf16", lambda a: a.to(torch.bfloat16), (x32,), 4 * e, 2 * e),
        ("silu(a) * b", lambda a, b: torch.nn.functional.silu(a) * b, (x, y), 4 * e, 2 * e),
        ("rmsnorm over rows of 4096", rms, (x, w), 2 * e, 2 * e),
        ("rmsnorm over rows of 8192", rms, (wide, w2), 2 * e, 2 * e),
        ("residual add and rmsnorm over rows of 4096", add_rms, (x, y, w), 4 * e, 4 * e),
        ("sum over rows (dim 0)", lambda a: a.sum(dim=0), (x,), 2 * e, 2.0 * width),
    ]


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_compiled_kernels_bench")
    if torch is None:
        return 3
    b = Bench(torch, args)
    gpu = torch.cuda.get_device_name()
    report = []
    t0 = time.time()
    src = (f"this file's run ({gpu}; torch {torch.__version__}, CUDA {torch.version.cuda}): {{mode}} {{name}} over {{elements}} "
           f"bf16 elements ([{{rows}}, 4096]), L2 overwritten before each call, CUPTI kernel time (a call's kernels summed), "
           f"median of {args.repeat}")

    def save():
        b.write(args.output, args.hardware, f"torch.compile's Triton kernels and ATen's eager ones for the same element-wise work on one {gpu} "
                                            f"by tools/torch_compiled_kernels_bench.py.")
        if args.report:
            write_atomic(args.report, json.dumps({"gpu": gpu, "torch": torch.__version__, "ops": report}, indent=1) + "\n")

    sizes = (1 << 22, 1 << 24, 1 << 26, 1 << 28) if not args.quick else (1 << 22,)
    for elements in sizes:
        for name, fn, inputs, read, written in ops(torch, elements):
            for mode in ("compiled", "eager"):
                call = torch.compile(fn, dynamic=False, fullgraph=True) if mode == "compiled" else fn
                label = f"{mode} {name}, {elements >> 20} Mi elements"
                try:
                    call(*inputs)
                    ks = [k for k in b.kernels(b.flushed(lambda: call(*inputs)), args.repeat) if not_flush(k[0])]
                except Exception as e:  # one op that fails to compile must not lose the others
                    b.failed.append({"name": label, "error": str(e)[:300]})
                    print(f"  FAILED {label}: {str(e)[:200]}", flush=True)
                    continue
                kernels = kernels_by_name(ks, args.repeat)
                report.append({"op": label, "bytes_read": read, "bytes_written": written, "kernels": kernels})
                if len(kernels) > 1 or (mode == "eager" and name not in ONE_STREAMING_KERNEL):
                    continue  # several kernels, or ATen's cast loop or reduce kernel: not one streaming pass (the report keeps it)
                row = {"kind": "elementwise", "name": label, "bytes_read": read, "bytes_written": written,
                       "source": src.format(mode=mode, name=name, elements=elements, rows=elements // 4096)}
                b.add(row, None, recorded=ks)
        torch.cuda.empty_cache()
        save()
    print(f"wrote {len(b.rows)} rows to {args.output} ({len(b.failed)} failed) in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
