#!/usr/bin/env python3
"""What torchao's fp8 recipes cost op by op on one GPU: the linears' GEMMs and the scaling casts.

torchao's Float8Linear runs each linear's three GEMMs through torch._scaled_mm: the forward with
fast accumulation, the input and weight gradients without (Float8LinearConfig's gemm configs).
Tensor-wise scaling passes one scale per operand; row-wise ("axiswise") one per row of the first
operand and one per column of the second. This times, for the TP-8 shards of Llama 3 8B's and
70B's linears (forward, input gradient and weight gradient shapes):

  gemm part: torch.mm in bf16, and torch._scaled_mm with tensor-wise and with row-wise scales,
             each with use_fast_accum on and off; cuBLAS's own kernel choice (PyTorch takes
             cuBLAS for row-wise scales from cuBLAS 12.9 on Hopper, ATen's CUTLASS kernel
             before), CUPTI kernel time summed over a call, median of the repeats.
  cast part: the casts that feed them, as torchao writes them (amax of |x| along an axis or over
             the whole tensor, a float32 scale, x * scale saturated to e4m3), eager and under
             torch.compile, each kernel's time and the bytes the cast must move at least.

Writes, atomically, after every part:
  -o FILE        a tpsim measurement file (kind gemm; "scaling" and "fast_accumulation" on fp8 rows;
                 and the compiled row and tensor-wise casts' kernels as elementwise rows, "loop":
                 "row_reduction" where looped)
  --casts FILE   the cast rows: per variant its kernels (name, median us) and the bytes it must move

    python3 tools/torch_fp8_linear_bench.py --hardware h100_sxm -o fp8_linears.json --casts fp8_casts.json

Needs PyTorch with CUDA and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import os
import sys
import time

from torch_op_bench import Bench, import_torch_with_cuda, kernels_by_name, write_atomic  # the op bench beside this file

# (model, linear): (out features, in features) of one TP-8 shard; wv is wk's shape.
LINEARS = {
    ("llama3_8b", "wq"): (512, 4096), ("llama3_8b", "wk"): (128, 4096), ("llama3_8b", "wo"): (4096, 512),
    ("llama3_8b", "w1"): (1792, 4096), ("llama3_8b", "w2"): (4096, 1792),
    ("llama3_70b", "wq"): (1024, 8192), ("llama3_70b", "wk"): (128, 8192), ("llama3_70b", "wo"): (8192, 1024),
    ("llama3_70b", "w1"): (3584, 8192), ("llama3_70b", "w2"): (8192, 3584),
}
FP8_MAX = 448.0  # e4m3's largest finite value


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="tpsim measurement file to write (atomically)")
    p.add_argument("--casts", required=True, help="cast rows (JSON) to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, h200, ...)")
    p.add_argument("--tokens", default="8192,16384", help="tokens a rank's linears see (comma-separated)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--settle", type=float, default=0.2, help="seconds of back-to-back calls before timing")
    p.add_argument("--parts", default="gemm,cast", help="comma-separated: gemm, cast")
    p.add_argument("--cast-widths", default="4096,14336",
                   help="columns of the cast inputs (comma-separated), each at every --tokens count of rows")
    p.add_argument("--quick", action="store_true", help="one linear and one cast shape (a smoke test)")
    args = p.parse_args()
    unknown = set(args.parts.split(",")) - {"gemm", "cast"}
    if unknown:
        p.error(f"--parts: unknown part(s) {', '.join(sorted(unknown))}")
    return args


def gemm_shapes(tokens, quick):
    """(model, linear, role, m, n, k): forward x[T,in] @ W.t(); input gradient dy[T,out] @ W;
    weight gradient dy.t()[out,T] @ x[T,in]. Distinct shapes only."""
    out, seen = [], set()
    for (model, linear), (o, i) in LINEARS.items():
        for t in tokens:
            for role, shape in (("forward", (t, o, i)), ("input_gradient", (t, i, o)), ("weight_gradient", (o, i, t))):
                if shape not in seen:
                    seen.add(shape)
                    out.append((model, linear, role) + shape)
    return out[:3] if quick else out


def gemm_variants(torch, m, n, k):
    """(dtype, scaling, fast accumulation, call, op text) for one shape; B column-major as
    torch._scaled_mm requires (nn.Linear's weight transposed)."""
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    row_a = torch.rand(m, 1, device="cuda") + 0.5
    row_b = torch.rand(1, n, device="cuda") + 0.5
    out = [("bf16", None, None, lambda: torch.mm(x, w.t()), "torch.mm")]
    for fast in (True, False):
        out.append(("fp8", "tensorwise", fast,
                    lambda fast=fast: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                       use_fast_accum=fast),
                    f"torch._scaled_mm (tensor-wise scales, use_fast_accum {'on' if fast else 'off'})"))
        out.append(("fp8", "rowwise", fast,
                    lambda fast=fast: torch._scaled_mm(x8, w8.t(), scale_a=row_a, scale_b=row_b, out_dtype=torch.bfloat16,
                                                       use_fast_accum=fast),
                    f"torch._scaled_mm (row-wise scales [m,1] and [1,n], use_fast_accum {'on' if fast else 'off'})"))
    return out


def cublaslt_version():
    """The cuBLASLt PyTorch loaded (cublasLtGetVersion), which decides who runs row-wise scales."""
    import ctypes
    for lib in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"):
        try:
            return ctypes.CDLL(lib).cublasLtGetVersion()
        except (OSError, AttributeError):
            continue
    return "unknown"


def gemm_part(b, torch, args, tokens):
    gpu = torch.cuda.get_device_name()
    src = (f"this file's run ({gpu}; torch {torch.__version__}, CUDA {torch.version.cuda}, cuBLASLt {cublaslt_version()}): "
           f"eager {{op}}, "
           f"{{what}}, A [m,k] row-major @ B [k,n] column-major, random normal data, back-to-back calls after "
           f"{args.settle} s of them, CUPTI kernel time (a call's kernels summed), median of {args.repeat}")
    for model, linear, role, m, n, k in gemm_shapes(tokens, args.quick):
        what = f"{model} {linear} shard under TP 8, {role} shape"
        try:
            variants = gemm_variants(torch, m, n, k)
        except Exception as e:  # one shape that does not fit must not lose the others
            b.failed.append({"name": f"gemm {m}x{n}x{k}", "error": str(e)[:300]})
            continue
        for dtype, scaling, fast, fn, op in variants:
            name = f"gemm {m}x{n}x{k} {dtype}" + (f" {scaling} {'fast' if fast else 'slow'} accumulation" if scaling else "")
            row = {"kind": "gemm", "name": name, "m": m, "n": n, "k": k, "dtype": dtype,
                   "source": src.format(op=op, what=what)}
            if scaling:
                row |= {"scaling": scaling, "fast_accumulation": fast}
            b.add(row, fn)
        del variants
        torch.cuda.empty_cache()


def casts(torch):
    """torchao's casts (float8_utils.tensor_to_amax / to_fp8_saturated and hp_tensor_and_scale_to_float8),
    as (name, fn(x)): rows along dim -1, columns along dim 0 written K-major for the weight
    gradient's second operand, and the whole tensor."""
    e4m3 = torch.float8_e4m3fn

    def scale_of(amax):
        s = FP8_MAX / torch.clamp(amax.float(), min=1e-12)
        return torch.exp2(torch.floor(torch.log2(s)))  # round_scales_to_power_of_2, as the rowwise recipe

    def rows(x):
        s = scale_of(torch.amax(torch.abs(x), dim=-1, keepdim=True))
        return (x.to(torch.float32) * s).clamp(min=-FP8_MAX, max=FP8_MAX).to(e4m3), s

    def columns(x):
        s = scale_of(torch.amax(torch.abs(x), dim=0, keepdim=True))
        y = (x.to(torch.float32) * s).clamp(min=-FP8_MAX, max=FP8_MAX).to(e4m3)
        return y.t().contiguous().t(), s

    def tensor(x):
        s = FP8_MAX / torch.clamp(torch.max(torch.abs(x)).float(), min=1e-12)
        return (x.to(torch.float32) * s).clamp(min=-FP8_MAX, max=FP8_MAX).to(e4m3), s

    return (("rowwise_rows", rows), ("rowwise_columns", columns), ("tensorwise", tensor))


# Eager casts' kernels that appear once a call, by name: (part, loop, operands, bytes read and
# written per element; m rows, k columns, s scale count). The widening copy and the clamp run
# twice a call (once on the scale), so their medians mix two kernels: left out.
# The first marker a kernel's name holds names it (the column-major copy is ATen's float8 copy in
# its legacy loop, fp8 to fp8; the narrowing copy the same in its vectorized loop).
EAGER_CAST_KERNELS = (
    ("AbsFunctor", "abs", "vectorized", 0, lambda m, k, s: (2 * m * k, 2 * m * k)),
    ("reduce_kernel", "amax", "vectorized", 0, lambda m, k, s: (2 * m * k, 2 * s)),
    ("elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::float8_copy", "column-major copy", "strided", 2,
     lambda m, k, s: (m * k, m * k)),
    ("vectorized_elementwise_kernel<4, at::native::float8_copy", "narrowing copy to fp8", "vectorized", 0, lambda m, k, s: (4 * m * k, m * k)),
    ("elementwise_kernel<128, ", "x * scale", "strided", 3, lambda m, k, s: (4 * m * k + 4 * s, 4 * m * k)),
)


def eager_cast_measurements(entry, src):
    """An eager cast's single kernels as tpsim elementwise rows (torchao's aten ops one by one)."""
    m, k, cast = entry["m"], entry["k"], entry["cast"]
    scales = {"tensorwise": 1, "rowwise_rows": m, "rowwise_columns": k}.get(cast)
    if scales is None:
        return []
    rows = []
    for kernel in entry.get("kernels", []):
        if kernel.get("per_call") != 1:
            continue
        for marker, part, loop, operands, moved in EAGER_CAST_KERNELS:
            if marker not in kernel["name"]:
                continue
            read, written = moved(m, k, scales)
            row = {"kind": "elementwise", "name": f"eager {cast} fp8 cast's {part}, bf16 {m} x {k}",
                   "bytes_read": read, "bytes_written": written, "elements": m * k, "loop": loop}
            if operands:
                row["operands"] = operands
            rows.append(row | {"source": src.format(what=f"{cast} cast in eager PyTorch (aten ops one by one), its {part} kernel"),
                               "time_us": kernel["median_us"], "kernel": kernel["name"][:100]})
            break
    return rows


def cast_measurements(entry, gpu, torch_version, casts_file):
    """A cast's kernels as tpsim elementwise rows ([] for the others): eager, its single kernels
    (eager_cast_measurements); compiled as follows.

    Row cast: Inductor's one reduction kernel, looped (triton_red_..., priced per element and
    per row) or persistent (triton_per_..., a row in registers: streamed). Bytes: the bf16
    input once, the fp8 output and one fp32 scale a row.
    Tensor-wise cast: Inductor's three kernels, of which two move the tensor: the amax
    reduction (triton_red_..._abs_max: reads it, writes its partial maxima, a few bytes: 4 here)
    and the cast (triton_poi_...: reads it again, writes fp8); the one between turns the maxima
    into the scale and is left out."""
    m, k, kernels = entry["m"], entry["k"], entry.get("kernels", [])
    if entry.get("mode") == "eager":
        return eager_cast_measurements(entry, f"models/measurements/fp8_casts/{casts_file} ({gpu}, torch {torch_version}): "
                                              "torchao's {what}, CUPTI kernel time, median of the repeats")
    if entry.get("mode") != "compiled":
        return []
    src = (f"models/measurements/fp8_casts/{casts_file} ({gpu}, torch {torch_version}): torch.compile of torchao's "
           "{what}, CUPTI kernel time, median of the repeats")
    if entry.get("cast") == "rowwise_rows" and len(kernels) == 1:
        kernel = kernels[0]
        looped = kernel["name"].startswith("triton_red_")
        row = {"kind": "elementwise", "name": f"compiled rowwise fp8 cast along rows, bf16 {m} x {k}",
               "bytes_read": 2 * m * k, "bytes_written": m * k + 4 * m, "elements": m * k,
               "loop": "row_reduction" if looped else "vectorized"}
        if looped:
            row["row"] = k
        row["source"] = src.format(what="rowwise cast (amax of |x| along each row, a float32 power-of-2 scale, "
                                        "x * scale saturated to e4m3), one Triton kernel a call")
        return [row | {"time_us": kernel["median_us"], "kernel": kernel["name"]}]
    if entry.get("cast") != "tensorwise" or len(kernels) != 3:
        return []
    amax = [kr for kr in kernels if kr["name"].startswith("triton_red_fused_abs_max")]
    cast = [kr for kr in kernels if kr["name"].startswith("triton_poi_")]
    if len(amax) != 1 or len(cast) != 1:
        return []
    what = ("tensor-wise cast (amax of |x| over the tensor, a float32 scale, x * scale saturated to e4m3), "
            "the {part} of its three Triton kernels a call")
    return [{"kind": "elementwise", "name": f"compiled tensor-wise fp8 cast's amax, bf16 {m} x {k}",
             "bytes_read": 2 * m * k, "bytes_written": 4, "elements": m * k, "loop": "vectorized",
             "source": src.format(what=what.format(part="first (the amax reduction)")),
             "time_us": amax[0]["median_us"], "kernel": amax[0]["name"]},
            {"kind": "elementwise", "name": f"compiled tensor-wise fp8 cast's cast, bf16 {m} x {k}",
             "bytes_read": 2 * m * k, "bytes_written": m * k, "elements": m * k, "loop": "vectorized",
             "source": src.format(what=what.format(part="third (the scaled cast)")),
             "time_us": cast[0]["median_us"], "kernel": cast[0]["name"]}]


def cast_part(b, torch, args, tokens, results, save):
    shapes = [(m, int(k)) for m in tokens for k in args.cast_widths.split(",")]
    if args.quick:
        shapes = shapes[:1]
    # One compiled graph per cast and shape: let Dynamo keep them all rather than fall back to eager.
    for limit in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, max(64, 4 * len(shapes)))
    for m, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        at_least = {"read": 2 * m * k, "written": m * k}
        for name, fn in casts(torch):
            for mode in ("eager", "compiled"):
                entry = {"cast": name, "mode": mode, "m": m, "k": k, "bytes_at_least": at_least}
                try:
                    call = fn if mode == "eager" else torch.compile(fn, dynamic=False, fullgraph=True)
                    t0 = time.time()
                    call(x)
                    torch.cuda.synchronize()
                    entry["first_call_s"] = round(time.time() - t0, 1)
                    ks = b.kernels(lambda: call(x), args.repeat)
                    entry["kernels"] = kernels_by_name(ks, args.repeat)
                    entry["total_us"] = round(sum(e["median_us"] * e["per_call"] for e in entry["kernels"]), 3)
                    entry["gbps_at_least"] = round((at_least["read"] + at_least["written"]) / entry["total_us"] / 1e3, 1)
                    print(f"  cast {name} {mode} {m}x{k}: {entry['total_us']:.1f} us in {len(entry['kernels'])} kernels", flush=True)
                    b.rows += cast_measurements(entry, torch.cuda.get_device_name(), torch.__version__, os.path.basename(args.casts))
                except Exception as e:
                    entry["error"] = str(e)[:300]
                    print(f"  FAILED cast {name} {mode} {m}x{k}: {str(e)[:200]}", flush=True)
                results.append(entry)
        del x
        save()


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_fp8_linear_bench")
    if torch is None:
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    tokens = [int(t) for t in args.tokens.split(",")]
    b = Bench(torch, args)
    cast_results = []
    gpu = torch.cuda.get_device_name()
    t0 = time.time()

    def save():
        description = (f"torchao fp8 linears' GEMMs on one {gpu} by tools/torch_fp8_linear_bench.py (torch {torch.__version__}, "
                       f"CUDA {torch.version.cuda}): Llama 3 8B and 70B TP-8 shards at {args.tokens} tokens, bf16 and fp8 "
                       f"tensor-wise and row-wise, fast accumulation on and off.")
        b.write(args.output, args.hardware, description)
        write_atomic(args.casts, json.dumps({"gpu": gpu, "torch": torch.__version__, "casts": cast_results}, indent=1) + "\n")

    for part in args.parts.split(","):
        print(f"{part} ({time.time() - t0:.0f} s)", flush=True)
        if part == "gemm":
            gemm_part(b, torch, args, tokens)
        else:
            cast_part(b, torch, args, tokens, cast_results, save)
        save()
    print(f"wrote {len(b.rows)} rows to {args.output} ({len(b.failed)} failed), {len(cast_results)} casts, "
          f"in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
