#!/usr/bin/env python3
"""A Llama training step on one GPU, timed and broken into its kernels, to check tpsim's step.

The model is torchtitan's Llama 3 as of its commit 9dec370 (models/llama/model.py and
models/norms.py: RMSNorm as aten ops, rotary embeddings through complex numbers, repeat_kv,
SDPA causal, SwiGLU), the loss F.cross_entropy on logits.float(), AdamW (foreach, as that
commit's default) after clip_grad_norm_. With --fsdp each block and the root are wrapped in
FSDP2's fully_shard on a process group of one GPU with torchtitan's mixed precision (bf16
parameters for compute, fp32 master weights and gradient reduction), so the step runs FSDP's
copy-in, copy-out and gradient casts as at any world size, without its traffic.

Output (JSON, written atomically): the step's GPU time (CUDA events, median over the timed
steps) and one profiled step's kernels in launch order, each tagged with the segment it ran
in. Segments are marked on the GPU's stream by tiny sleep kernels: in forward before the
embedding, each block and the output; in backward from tensor hooks as the gradient reaches
each block's input; then the optimizer. A whole step is a validation figure only: never fit a
model to it. Its single kernels are op-level measurements.

    python3 tools/torch_train_step_bench.py -o step.json [--layers 4] [--batch 2] [--fsdp] [--compile]
        [--ac selective_op] [--sdpa flash]

--ac selective_op wraps every block in torchtitan 9dec370's per-op selective checkpointing;
--sdpa flash forces SDPA's FlashAttention-2 backend (that commit's PyTorch ran it; 2.11 picks
cuDNN's on Hopper, whose op that save list does not name).

Needs PyTorch with CUDA and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

from torch_op_bench import import_torch_with_cuda, write_atomic  # the op bench beside this file: the same helpers


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--steps", type=int, default=5, help="timed steps (after 2 warm-up steps)")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 on a group of one GPU, torchtitan's mixed precision")
    p.add_argument("--compile", action="store_true", help="torch.compile each block (torchtitan's per-block compile)")
    p.add_argument("--ac", choices=("none", "selective_op"), default="none",
                   help="activation checkpointing: none, or torchtitan 9dec370's per-op selective policy on every block")
    p.add_argument("--sdpa", choices=("default", "flash"), default="default",
                   help="SDPA backend: PyTorch's choice (cuDNN on Hopper in 2.11) or forced to FlashAttention-2")
    return p.parse_args()


def build_model(torch, a):
    nn, F = torch.nn, torch.nn.functional
    head_dim = a.dim // a.heads

    def sdpa_context():
        if a.sdpa == "flash":
            from torch.nn.attention import SDPBackend, sdpa_kernel
            return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
        import contextlib
        return contextlib.nullcontext()

    class RMSNorm(nn.Module):  # torchtitan 9dec370 models/norms.py
        def __init__(self, dim, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            return self._norm(x.float()).type_as(x) * self.weight

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        f = freqs_cis[: xq_.shape[1]].view(1, xq_.shape[1], 1, xq_.shape[-1])
        return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)

    def repeat_kv(x, n_rep):
        bs, slen, n_kv, hd = x.shape
        if n_rep == 1:
            return x
        return torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(a.dim, a.heads * head_dim, bias=False)
            self.wk = nn.Linear(a.dim, a.kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(a.dim, a.kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(a.heads * head_dim, a.dim, bias=False)

        def forward(self, x, freqs_cis):
            bs, seqlen, _ = x.shape
            xq = self.wq(x).view(bs, seqlen, -1, head_dim)
            xk = self.wk(x).view(bs, seqlen, -1, head_dim)
            xv = self.wv(x).view(bs, seqlen, -1, head_dim)
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
            keys, values = repeat_kv(xk, a.heads // a.kv_heads), repeat_kv(xv, a.heads // a.kv_heads)
            with sdpa_context():
                out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), is_causal=True)
            return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(a.dim, a.ffn, bias=False)
            self.w2 = nn.Linear(a.ffn, a.dim, bias=False)
            self.w3 = nn.Linear(a.dim, a.ffn, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.feed_forward = FeedForward()
            self.attention_norm = RMSNorm(a.dim)
            self.ffn_norm = RMSNorm(a.dim)

        def forward(self, x, freqs_cis):
            h = x + self.attention(self.attention_norm(x), freqs_cis)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        # forward marks segments through `mark(name)` (None: no marks) and returns the loss.
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(a.vocab, a.dim)
            self.layers = nn.ModuleDict({str(i): Block() for i in range(a.layers)})
            self.norm = RMSNorm(a.dim)
            self.output = nn.Linear(a.dim, a.vocab, bias=False)

        def forward(self, tokens, labels, freqs_cis, mark=None):
            seg = mark or (lambda name: None)
            seg("forward.embedding")
            h = self.tok_embeddings(tokens)
            for i, block in self.layers.items():
                seg(f"forward.layer{i}")
                if mark:  # the gradient reaching block i's input: the block before it starts its backward
                    after = "backward.embedding" if i == "0" else f"backward.layer{int(i) - 1}"
                    h.register_hook(lambda g, n=after: seg(n))
                h = block(h, freqs_cis)
            seg("forward.output")
            if mark:
                h.register_hook(lambda g: seg(f"backward.layer{a.layers - 1}"))
            logits = self.output(self.norm(h))
            return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))

    return Transformer()


def selective_op_checkpoint(torch, block):
    """torchtitan 9dec370's per-op selective AC (_apply_ac_to_transformer_block, selective_ac_option
    'op'): keep the outputs of the ops on its save list, but every second mm, and recompute the rest."""
    from collections import defaultdict

    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default, torch.ops._c10d_functional.reduce_scatter_tensor.default,
            torch.ops.aten.max.default}

    def context_fn():
        meta = defaultdict(int)

        def policy(ctx, func, *args, **kwargs):
            key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
            if func == torch.ops.aten.mm.default:
                meta[key] += 1
            keep = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
        return create_selective_checkpoint_contexts(policy)
    return checkpoint_wrapper(block, context_fn=context_fn, preserve_rng_state=False)


def main():
    a = parse_args()
    torch = import_torch_with_cuda("torch_train_step_bench")
    if torch is None:
        return 3
    torch.cuda.set_device(0)
    dev = torch.device("cuda:0")
    notes = []
    with torch.device("meta"):
        model = build_model(torch, a)
    model = model.to_empty(device=dev)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    hd = a.dim // a.heads  # rotary table, complex64, kept off the module so no cast touches it
    freqs = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=dev)[: hd // 2].float() / hd))
    freqs = torch.outer(torch.arange(a.seq, device=dev), freqs).float()
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    if a.ac == "selective_op":  # before compile and FSDP, as torchtitan applies them
        for i in list(model.layers.keys()):
            model.layers.register_module(i, selective_op_checkpoint(torch, model.layers[i]))
    if a.compile:  # before FSDP, as torchtitan applies them
        for i in list(model.layers.keys()):
            model.layers.register_module(i, torch.compile(model.layers[i], fullgraph=True))
    fsdp = False
    if a.fsdp:
        try:
            import torch.distributed as dist
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29519")
            dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for i, block in model.layers.items():  # torchtitan: the last block keeps its parameters after forward
                fully_shard(block, mp_policy=mp, reshard_after_forward=int(i) < a.layers - 1)
            fully_shard(model, mp_policy=mp, reshard_after_forward=True)
            fsdp = True
        except Exception as e:  # keep going without it, and say so
            notes.append(f"FSDP2 unavailable ({str(e)[:200]}): bf16 parameters, no master weights")
    if not fsdp:
        model = model.to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)

    def mark():  # a tiny kernel on the stream: the next segment starts here
        torch.cuda._sleep(1)

    seg_names = []

    def step(marking):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        labels = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)

        def seg(name):
            seg_names.append(name)
            mark()

        loss = model(tokens, labels, freqs_cis, seg if marking else None)
        if marking:
            seg("backward.output")
        loss.backward()
        if marking:
            seg("optimizer")
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad()
        if marking:
            seg("end")
        return loss

    t0 = time.perf_counter()
    for _ in range(2):
        step(False)
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    times = []
    for _ in range(a.steps):
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(2e8))  # the host gets ahead: the span is GPU time
        b.record()
        step(False)
        e.record()
        torch.cuda.synchronize()
        times.append(b.elapsed_time(e))
    host0 = time.perf_counter()
    step(False)
    torch.cuda.synchronize()
    host_ms = (time.perf_counter() - host0) * 1e3
    peak = torch.cuda.max_memory_allocated() / 2**30

    trace = os.path.join(os.path.dirname(os.path.abspath(a.output)), ".step_trace.json")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(int(2e8))
        step(True)
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace)
    with open(trace) as f:
        ev = json.load(f)["traceEvents"]
    os.remove(trace)
    gpu = sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    kernels, seg_i, first = [], -1, None
    for e in gpu:
        if "sleep" in e["name"].lower() or "spin_kernel" in e["name"]:
            if e["dur"] > 1000:  # the long sleep before the step
                continue
            seg_i += 1
            continue
        if seg_i < 0:
            continue
        first = e["ts"] if first is None else first
        seg = seg_names[seg_i] if seg_i < len(seg_names) else f"segment{seg_i}"
        kernels.append([seg, re.sub(r"\s+", " ", e["name"])[:120], round(e["ts"] - first, 3), round(e["dur"], 3)])
    props = torch.cuda.get_device_properties(0)
    doc = {
        "format": "tpsim-step-profile",
        "gpu": props.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "config": vars(a) | {"fsdp_used": fsdp, "optimizer": "AdamW foreach, clip_grad_norm_ foreach"},
        "notes": notes,
        "step_ms": [round(t, 3) for t in times],
        "step_ms_median": round(statistics.median(times), 3),
        "host_ms_one_step": round(host_ms, 2),
        "warmup_s": round(warm_s, 1),
        "peak_allocated_gib": round(peak, 2),
        "segments": seg_names,
        "kernels": kernels,
    }
    write_atomic(a.output, json.dumps(doc, indent=0) + "\n")
    print(f"{a.output}: step {doc['step_ms_median']} ms (GPU), host {host_ms:.0f} ms, {len(kernels)} kernels, peak {peak:.1f} GiB, fsdp {fsdp}")
    if fsdp:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
