#!/usr/bin/env python3
"""The single element-wise kernels of a profiled eager training step, as tpsim measurement rows.

Reads what tools/torch_train_step_bench.py wrote for an eager (uncompiled) run of torchtitan's
Llama layer and names, in one layer's forward and backward and in the loss, each ATen kernel
whose traffic is known from the model's shapes: the RMSNorm, RoPE, repeat_kv, SwiGLU and
residual kernels, the logits' up-cast. Each becomes an op-level row (kind "elementwise": its
bytes, its output elements and the ATen loop it runs, or kind "reduction"); the GEMMs,
attention and FSDP's copies are left out. The kernels must come in the order the model code
launches them: any other sequence is an error, not a guess.

    python3 tools/step_profile_kernels.py PROFILE.json --hardware h100_sxm -o rows.json
"""
import argparse
import gzip
import json
import os
import re
import sys

from torch_op_bench import elementwise_row, write_measurements  # the op bench beside this file: the same file format

# Kernels that carry no row and may sit anywhere between the ones that do.
SKIP = re.compile(r"Memset|nvjet|gemm|cudnn|flash|conj_kernel|Memcpy|dot_do_o|convert_dq")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def layer_sequences(c):
    """(regex, row) in launch order for forward and backward; row None: matched, no row."""
    t = c["batch"] * c["seq"]
    n, nk = t * c["dim"], t * c["kv_heads"] * (c["dim"] // c["heads"])
    nf = t * c["ffn"]
    f32, bf = 4, 2
    cast = r"unrolled_elementwise_kernel<at::native::direct_copy"
    strided = r"^void at::native::elementwise_kernel<128"
    vec = r"vectorized_elementwise_kernel"

    ew = elementwise_row

    # RoPE's table broadcasts over batch and heads: 4 dimensions, 3 at batch 1.
    rope_dims = 4 if c["batch"] > 1 else 3

    def norm(p):
        return [(cast, ew(f"{p}.float (bf16 -> fp32)", bf * n, f32 * n, n, "cast")),
                (vec + r".*pow_tensor", ew(f"{p}.pow", f32 * n, f32 * n)),
                (r"reduce_kernel.*MeanOps", None), (r"CUDAFunctorOnSelf_add", None), (r"rsqrt_kernel", None),
                (strided, ew(f"{p}.mul_rsqrt (broadcast)", f32 * n, f32 * n, n, "strided", 3)),
                (r"bfloat16_copy_kernel", ew(f"{p}.type_as (fp32 -> bf16)", f32 * n, bf * n)),
                (strided, ew(f"{p}.mul_weight (broadcast)", bf * n, bf * n, n, "strided", 3))]

    def norm_backward(p):
        return [(vec + r".*BinaryFunctor<c10::BFloat16", ew(f"{p}.backward.grad_weight product", 2 * bf * n, bf * n)),
                (strided, ew(f"{p}.backward.grad_input (broadcast weight)", bf * n, bf * n, n, "strided", 3)),
                (r"reduce_kernel", None),
                (cast, ew(f"{p}.backward.type_as grad (bf16 -> fp32)", bf * n, f32 * n, n, "cast")),
                (vec + r".*BinaryFunctor<float", ew(f"{p}.backward.grad_rsqrt product", 2 * f32 * n, f32 * n)),
                (strided, ew(f"{p}.backward.grad_x (broadcast rsqrt)", f32 * n, f32 * n, n, "strided", 3)),
                (r"reduce_kernel", None), (vec, None), (vec, None), (vec, None),
                (strided, ew(f"{p}.backward.mean grad (expand)", f32 * t, f32 * n, n, "strided", 2)),
                (vec + r".*AUnaryFunctor<float", ew(f"{p}.backward.pow times exponent", f32 * n, f32 * n)),
                (vec + r".*BinaryFunctor<float", ew(f"{p}.backward.pow grad", 2 * f32 * n, f32 * n)),
                (vec + r".*CUDAFunctor_add<float", ew(f"{p}.backward.sum of paths", 2 * f32 * n, f32 * n)),
                (r"bfloat16_copy_kernel", ew(f"{p}.backward.float grad (fp32 -> bf16)", f32 * n, bf * n)),
                (vec + r".*CUDAFunctor_add<c10::BFloat16", ew(f"{p}.backward.residual grad add", 2 * bf * n, bf * n))]

    forward = norm("attention_norm") + [
        (cast, ew("rope.q float (bf16 -> fp32)", bf * n, f32 * n, n, "cast")),
        (cast, ew("rope.k float (bf16 -> fp32)", bf * nk, f32 * nk, nk, "cast")),
        (strided, ew("rope.q complex product (broadcast table)", f32 * n, f32 * n, n // 2, "strided", 3, rope_dims)),
        (r"bfloat16_copy_kernel", ew("rope.q type_as (fp32 -> bf16)", f32 * n, bf * n)),
        (strided, ew("rope.k complex product (broadcast table)", f32 * nk, f32 * nk, nk // 2, "strided", 3, rope_dims)),
        (r"bfloat16_copy_kernel", ew("rope.k type_as (fp32 -> bf16)", f32 * nk, bf * nk)),
        (strided, ew("repeat_kv.k (expand copy)", bf * nk, bf * n, n, "strided", 2, 3)),
        (strided, ew("repeat_kv.v (expand copy)", bf * nk, bf * n, n, "strided", 2, 3)),
        (vec + r".*CUDAFunctor_add", ew("attention residual add", 2 * bf * n, bf * n)),
    ] + norm("ffn_norm") + [
        (vec + r".*silu_kernel", ew("ffn.silu", bf * nf, bf * nf)),
        (vec + r".*BinaryFunctor", ew("ffn.silu * w3", 2 * bf * nf, bf * nf)),
        (vec + r".*CUDAFunctor_add", ew("ffn residual add", 2 * bf * n, bf * n)),
    ]
    rep = c["heads"] // c["kv_heads"]
    backward = [
        (vec + r".*BinaryFunctor", ew("ffn.backward.mul grad (w3 side)", 2 * bf * nf, bf * nf)),
        (vec + r".*BinaryFunctor", ew("ffn.backward.mul grad (silu side)", 2 * bf * nf, bf * nf)),
        (vec + r".*silu_backward", ew("ffn.backward.silu_backward", 2 * bf * nf, bf * nf)),
        (vec + r".*CUDAFunctor_add", ew("ffn.backward.w1 + w3 input grads", 2 * bf * n, bf * n)),
    ] + norm_backward("ffn_norm") + [
        (r"reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16",
         {"kind": "reduction", "name": "repeat_kv.backward.k (sum over repeats)", "partials": rep, "bytes": bf * nk, "reduction": "aten_sum"}),
        (r"reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16",
         {"kind": "reduction", "name": "repeat_kv.backward.v (sum over repeats)", "partials": rep, "bytes": bf * nk, "reduction": "aten_sum"}),
        (cast, ew("rope.backward.k type_as grad (bf16 -> fp32)", bf * nk, f32 * nk, nk, "cast")),
        (strided, ew("rope.backward.k complex product", f32 * nk, f32 * nk, nk // 2, "strided", 3, rope_dims)),
        (cast, ew("rope.backward.q type_as grad (bf16 -> fp32)", bf * n, f32 * n, n, "cast")),
        (strided, ew("rope.backward.q complex product", f32 * n, f32 * n, n // 2, "strided", 3, rope_dims)),
        (r"bfloat16_copy_kernel", ew("rope.backward.k float grad (fp32 -> bf16)", f32 * nk, bf * nk)),
        (r"bfloat16_copy_kernel", ew("rope.backward.q float grad (fp32 -> bf16)", f32 * n, bf * n)),
        (vec + r".*CUDAFunctor_add", ew("attention.backward.wk + wv input grads", 2 * bf * n, bf * n)),
        (vec + r".*CUDAFunctor_add", ew("attention.backward.wq + (wk + wv) input grads", 2 * bf * n, bf * n)),
    ] + norm_backward("attention_norm")
    return forward, backward


def loss_sequence(c):
    logits = c["batch"] * c["seq"] * c["vocab"]
    # TensorIterator halves a tensor whose byte offsets pass 2^31 - 1 (the fp32 output's here)
    # until each launch indexes in 32 bits (TensorIteratorBase::with_32bit_indexing).
    parts = 1
    while 4 * logits / parts > 2**31 - 1:
        parts *= 2
    part = logits // parts
    return [(r"unrolled_elementwise_kernel<at::native::direct_copy",
             {"kind": "elementwise", "name": f"loss.logits.float (bf16 -> fp32, launch {i + 1} of {parts})",
              "bytes_read": 2 * part, "bytes_written": 4 * part, "elements": part, "loop": "cast"}) for i in range(parts)]


def match(kernels, expected, where):
    rows, i = [], 0
    for regex, row in expected:
        while i < len(kernels) and SKIP.search(kernels[i][0]) and not re.search(regex, kernels[i][0]):
            i += 1
        if i >= len(kernels):
            sys.exit(f"step_profile_kernels: {where}: ran out of kernels looking for /{regex}/")
        name, dur = kernels[i]
        if not re.search(regex, name):
            sys.exit(f"step_profile_kernels: {where}: kernel {i} is {name[:90]!r}, expected /{regex}/ (another model code or PyTorch?)")
        if row is not None:
            rows.append(row | {"time_us": round(dur, 3), "kernel": name[:100]})
        i += 1
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profile")
    p.add_argument("--hardware", required=True)
    p.add_argument("--layer", type=int, default=1, help="which layer's kernels (default 1: neither end of the stack)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    prof = load(a.profile)
    c = prof["config"]
    if c.get("compile"):
        sys.exit("step_profile_kernels: a compiled step's kernels are generated ones; give an eager profile")

    def segment(name, start=None, stop=None):
        ks = [(k[1], k[3]) for k in prof["kernels"] if k[0] == name]
        if start:  # FSDP's all-gather copies come first in a forward segment
            ks = ks[next(i for i, k in enumerate(ks) if re.search(start, k[0])):]
        if stop:  # and its gradient copies last in a backward one
            ks = ks[:next((i for i, k in enumerate(ks) if re.search(stop, k[0])), len(ks))]
        return ks

    forward, backward = layer_sequences(c)
    layer = a.layer
    rows = match(segment(f"forward.layer{layer}", start=r"direct_copy"), forward, f"forward.layer{layer}")
    rows += match(segment(f"backward.layer{layer}", stop=r"chunk_cat|Memcpy HtoD"), backward, f"backward.layer{layer}")
    rows += match(segment("forward.output", start=r"nvjet|gemm"), loss_sequence(c), "forward.output")
    source = (f"one kernel of a profiled eager training step of torchtitan's Llama layer (dim {c['dim']}, ffn {c['ffn']}, "
              f"{c['heads']} heads over {c['kv_heads']}, {c['batch']} x {c['seq']} tokens) on one {prof['gpu']}, torch {prof['torch']}, "
              f"by tools/torch_train_step_bench.py (CUPTI kernel time, one step)")
    for r in rows:
        r["source"] = source
    write_measurements(a.output, a.hardware,
                       (f"Element-wise kernels of one eager Llama training step on one {prof['gpu']} (torch {prof['torch']}, "
                           f"CUDA {prof['cuda']}), layer {layer}'s forward and backward and the loss's up-cast, "
                        f"from {os.path.basename(a.profile)} by tools/step_profile_kernels.py. Op-level: each row one kernel."),
                       rows)
    print(f"{a.output}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
