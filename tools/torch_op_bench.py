#!/usr/bin/env python3
"""Op-level measurements of what eager PyTorch runs on one GPU, as a tpsim measurement file.

Each row is one op as PyTorch issues it (torch.mm / torch._scaled_mm with cuBLAS's own kernel
choice, torch.sum over stacked partials, Tensor.copy_, scaled_dot_product_attention's flash or
cuDNN kernels), timed by the profiler (CUPTI kernel records: device time only, no launch gaps), the
median over the repeats; the kernel that ran is kept in "kernel". Nothing here is a decomposed
op or a layer: `tpsim calibrate` may fit these rows, `tpsim validate` checks a model on them.

    python3 tools/torch_op_bench.py --hardware h100_sxm -o measured.json [--quick]

Needs PyTorch with CUDA and one GPU; exits 3 with one line when there is none.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="measurement file to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, h200, ...)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--settle", type=float, default=0.2, help="seconds of back-to-back calls before timing (default 0.2)")
    p.add_argument("--quick", action="store_true", help="a few rows of each kind (a smoke test)")
    p.add_argument("--kineto", help="also write a Kineto trace (record_shapes) of a few GEMMs here")
    p.add_argument("--parts", default="gemm,reduction,copy,attention",
                   help="comma-separated parts to run (default: gemm,reduction,copy,attention; also: indexing, the "
                        "row gathers, index_put_, scatter_add and cats of eager torchtitan's MoE and MLA; grouped, torch._grouped_mm of its experts beside torch.bmm; strided, ATen's legacy loop by operands; strided_dims, its expanded copies by dimensions; grouped_fp8, torch._scaled_grouped_mm)")
    p.add_argument("--attention-backend", choices=("flash", "cudnn"), default="flash",
                   help="SDPA backend the attention rows force: flash (PyTorch's FlashAttention-2, rows \"flash2\") or "
                        "cudnn (cuDNN's fused attention, the default on Hopper in recent PyTorch; rows \"cudnn\")")
    p.add_argument("--long-attention", action="store_true",
                   help="also causal attention at 32k-128k tokens (batch 1, 32 heads over 8): the shapes of context parallelism")
    args = p.parse_args()
    unknown = set(args.parts.split(",")) - {"gemm", "reduction", "copy", "attention", "indexing", "grouped", "strided",
                                             "strided_dims", "grouped_fp8"}
    if unknown:
        p.error(f"--parts: unknown part(s) {', '.join(sorted(unknown))}")
    return args


def write_atomic(path, text):
    """The whole file or none of it: a temporary file beside it, renamed over it when written."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp_", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run_source(torch, conditions=""):
    """A row's source: this run's GPU and PyTorch, a `{op}` slot for the op, how it was timed."""
    return (f"this file's run ({torch.cuda.get_device_name()}, torch {torch.__version__}): {{op}}, "
            f"{conditions}L2 overwritten before each call, CUPTI kernel time")


def elementwise_row(name, read, written, elements=None, loop="vectorized", operands=None, dims=2, source=None):
    """One element-wise kernel as a tpsim measurement row: its traffic, and for ATen's unvectorized
    loops its output elements and loop; a strided loop's operands, and its dimensions where not 2."""
    row = {"kind": "elementwise", "name": name, "bytes_read": read, "bytes_written": written}
    if loop != "vectorized":
        row |= {"elements": elements, "loop": loop}
    if operands:
        row["operands"] = operands
        if dims != 2:
            row["dims"] = dims
    if source:
        row["source"] = source
    return row


def write_measurements(path, hardware, description, rows):
    """A tpsim measurement file (format, hardware, description, rows), written atomically."""
    doc = {"format": "tpsim-measurements", "hardware": hardware, "description": description, "measurements": rows}
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def kernels_by_name(kernels, repeat):
    """Each kernel name's calls per op call, median time (us) and, where recorded, launch grid, in order of first start."""
    by_name, grids = {}, {}
    for k in kernels:
        name, start, end = k[:3]
        by_name.setdefault(name, []).append(end - start)
        if len(k) > 3:
            grids.setdefault(name, k[3])
    return [{"name": name, "per_call": round(len(times) / repeat, 3), "median_us": round(statistics.median(times), 3)}
            | ({"grid": grids[name]} if name in grids else {}) for name, times in by_name.items()]


def not_flush(name):
    return "FillFunctor" not in name


class Bench:
    def __init__(self, torch, args):
        self.torch = torch
        self.args = args
        self.rows = []
        self.failed = []

    def flushed(self, op):
        """op after overwriting a buffer larger than L2, so its operands come from HBM, not from
        the last call's L2 lines; the fill kernel is left out of the timing (keep=not_flush)."""
        if not hasattr(self, "flush_buffer"):
            l2 = self.torch.cuda.get_device_properties(0).L2_cache_size
            self.flush_buffer = self.torch.empty(4 * l2, device="cuda", dtype=self.torch.uint8)

        def fn():
            self.flush_buffer.fill_(1)
            op()
        return fn

    def kernels(self, fn, repeat, grids=False):
        """The CUDA kernels and memcpys `repeat` calls of fn ran: (name, start us, end us), by start;
        with grids=True each also carries its launch grid ([x, y, z], None for a memcpy)."""
        torch = self.torch
        # Warm up for --settle seconds of back-to-back calls at least: under load an H100's
        # clock falls to what its power limit allows within milliseconds, and a training
        # step runs at that clock, not at an idle GPU's boost.
        t_end = time.time() + self.args.settle
        calls = 0
        while calls < self.args.warmup or time.time() < t_end:
            fn()
            calls += 1
            if calls % 8 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        out = []
        for e in gpu_events(torch, lambda: [fn() for _ in range(repeat)]):
            k = (e["name"], float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            out.append(k + (e.get("args", {}).get("grid"),) if grids else k)
        out.sort(key=lambda x: x[1])
        return out

    def per_call(self, fn, repeat=None, keep=None, overlap=False):
        """Median device time of one call and the name of its longest kernel.

        Calls run one after another on the GPU; each call's kernels are summed (a split-K
        GEMM's reduction kernel counts), or with overlap=True timed first start to last end."""
        repeat = repeat or self.args.repeat
        return self.summarise(self.kernels(fn, repeat), repeat, keep, overlap)

    @staticmethod
    def summarise(ks, repeat, keep=None, overlap=False):
        """per_call's answer from kernels already recorded for `repeat` calls."""
        if keep:
            ks = [k for k in ks if keep(k[0])]
        if not ks:
            raise RuntimeError("no kernel ran")
        per = len(ks) // repeat
        if per == 0 or (len(ks) % repeat and overlap):
            raise RuntimeError(f"{len(ks)} kernels for {repeat} calls")
        if len(ks) % repeat:  # an extra kernel (a workspace memset, say): the mean, not the median
            return sum(k[2] - k[1] for k in ks) / repeat, max(ks, key=lambda k: k[2] - k[1])[0], per
        times = []
        for i in range(repeat):
            call = ks[i * per:(i + 1) * per]
            if overlap:
                times.append(max(k[2] for k in call) - min(k[1] for k in call))
            else:
                times.append(sum(k[2] - k[1] for k in call))
        longest = max(ks[:per], key=lambda k: k[2] - k[1])[0]
        return statistics.median(times), longest, per

    def write(self, path, hardware, description):
        """The rows so far as a measurement file, the description closed by what failed."""
        description += f" Rows that failed: {len(self.failed)}."
        if self.failed:
            description += " " + json.dumps(self.failed)
        write_measurements(path, hardware, description, self.rows)

    def add(self, row, fn, recorded=None, **kw):
        """Time fn as a row; with `recorded` (kernels of args.repeat calls) fn is not run again."""
        try:
            us, kernel, per = (self.summarise(recorded, self.args.repeat, **kw) if recorded is not None
                               else self.per_call(fn, **kw))
        except Exception as e:  # one bad shape must not lose the others
            self.failed.append({"name": row.get("name", row["kind"]), "error": str(e)[:300]})
            print(f"  FAILED {row.get('name', row['kind'])}: {str(e)[:200]}", flush=True)
            return
        row["time_us"] = round(us, 3)
        if row["kind"] in ("gemm", "gemm_pair", "elementwise"):
            row["kernel"] = kernel + (f" (+{per - 1} more kernels a call)" if per > 1 and row["kind"] != "gemm_pair" else "")
        self.rows.append(row)
        print(f"  {row.get('name', row['kind'])}: {us:.2f} us  [{kernel[:90]}]", flush=True)


def gemm_rows(b, torch, quick):
    dev = "cuda"
    shapes = {"bf16": [], "fp32": [], "fp8": []}
    # Wave staircase at N = K = 8192 and the K sweep (what microbench measures).
    for m in (512, 1024, 2048, 4096, 4224, 4352, 6144, 8192, 8448):
        shapes["bf16"].append((m, 8192, 8192))
    for k in (256, 512, 1024, 2048, 8192, 16384):
        shapes["bf16"].append((4096, 4096, k))
    # Async TP's per-shard submatmuls and their whole-M baselines (kraken's benchmark widths,
    # Llama 3 70B's FFN under TP 8).
    for (n, k) in ((6656, 4096), (6656, 8192), (6656, 16384), (4096, 14336), (3584, 8192), (8192, 3584)):
        for m in (64, 128, 256, 512, 1024, 2048, 4096):
            shapes["bf16"].append((m, n, k))
    for m in (1, 16, 32, 64, 128, 256, 8192):
        shapes["bf16"].append((m, 8192, 8192))
    # fp32 (TF32 off, PyTorch's default): small M falls with M or not? kraken's fp32 shards.
    for k in (4096, 8192, 16384, 32768):
        for m in (16, 32, 64, 128, 256):
            shapes["fp32"].append((m, 6656, k))
    for s in (1024, 2048, 4096, 8192):
        shapes["fp32"].append((s, s, s))
    for m in (512, 1024, 2048):
        shapes["fp32"].append((m, 6656, 8192))
    # Linear layers of Llama 3 8B (TP 1) and 70B under TP 8 (QKV, output, gate+up, down) over
    # the token counts a step or a shard gives them.
    for (n, k) in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336),
                   (1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)):
        for m in (384, 768, 1536, 3072, 6144, 8192, 16384):
            shapes["bf16"].append((m, n, k))
            if m in (768, 3072, 16384):
                shapes["fp8"].append((m, n, k))
    for m in (1, 8, 16, 24, 32, 48, 64, 96, 128, 192):
        shapes["fp32"].append((m, 8192, 8192))
    # fp8 (e4m3 x e4m3 -> bf16, tensor-wise scales, as torchao's Float8Linear runs forward).
    for s in (2048, 4096, 8192):
        shapes["fp8"].append((s, s, s))
    for (n, k) in ((4096, 14336), (14336, 4096), (8192, 28672), (28672, 8192), (6656, 16384)):
        for m in (256, 1024, 8192):
            shapes["fp8"].append((m, n, k))
    if quick:
        shapes = {d: v[:3] for d, v in shapes.items()}
    src = ("this file's run ({gpu}; torch {tv}, CUDA {cv}): eager {op}, x [m,k] @ w[n,k].t() "
           "as nn.Linear lays it out, random normal data, CUPTI kernel time, median of {r}")
    meta = dict(gpu=torch.cuda.get_device_name(), tv=torch.__version__, cv=torch.version.cuda, r=b.args.repeat)
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype, lst in shapes.items():
        for (m, n, k) in lst:
            try:
                if dtype == "fp8":
                    x = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
                    w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
                    one = torch.tensor(1.0, device=dev)
                    fn = (lambda x=x, w=w, one=one: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                    op = "torch._scaled_mm (use_fast_accum off, as torchao's Float8Linear runs both gradient GEMMs)"
                else:
                    t = torch.bfloat16 if dtype == "bf16" else torch.float32
                    x = torch.randn(m, k, device=dev, dtype=t)
                    w = torch.randn(n, k, device=dev, dtype=t)
                    fn = (lambda x=x, w=w: torch.mm(x, w.t()))
                    op = "torch.mm"
            except Exception as e:
                b.failed.append({"name": f"gemm {m}x{n}x{k} {dtype}", "error": str(e)[:300]})
                continue
            row = {"kind": "gemm", "name": f"gemm {m}x{n}x{k} {dtype}", "m": m, "n": n, "k": k, "dtype": dtype,
                   "source": src.format(op=op, **meta)}
            b.add(row, fn)
            del x, w
    # Two thin GEMMs at once on two streams (async TP's alternating streams), first start to last end.
    # A spin kernel on the main stream first keeps the GPU busy while the host issues both, so
    # the second does not start a host call's time after the first (the spin is not timed).
    pairs = [(m, n, k) for (n, k) in ((6656, 16384), (3584, 8192), (4096, 14336)) for m in (128, 256, 512, 1024)]
    pairs.append((8192, 8192, 8192))
    if quick:
        pairs = pairs[:2]
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for (m, n, k) in pairs:
        x1 = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        x2 = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)

        def pair(x1=x1, x2=x2, w=w):
            main = torch.cuda.current_stream()
            torch.cuda._sleep(200000)  # ~100 us at Hopper's clocks: longer than issuing the pair
            s1.wait_stream(main)
            s2.wait_stream(main)
            with torch.cuda.stream(s1):
                torch.mm(x1, w.t())
            with torch.cuda.stream(s2):
                torch.mm(x2, w.t())
            main.wait_stream(s1)
            main.wait_stream(s2)
        row = {"kind": "gemm_pair", "name": f"gemm {m}x{n}x{k} bf16 x2 on two streams", "m": m, "n": n, "k": k,
               "dtype": "bf16", "source": src.format(op="torch.mm on two streams, first start to last end", **meta)}
        b.add(row, pair, overlap=True, keep=lambda name: "spin_kernel" not in name)


def reduction_rows(b, torch, quick):
    # matmul -> reduce-scatter's end: torch.sum over the stacked partials (dim 0), bf16.
    n = 8192
    sizes = (1, 4, 16, 64, 256) if not quick else (16,)
    for partials in (2, 4, 8):
        for mib in sizes:
            rows = mib * 1048576 // (2 * n)
            x = torch.randn(partials, rows, n, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
            row = {"kind": "reduction", "name": f"aten sum of {partials} partials of {mib} MiB bf16",
                   "partials": partials, "bytes": mib * 1048576, "reduction": "aten_sum",
                   "source": f"this file's run ({torch.cuda.get_device_name()}, torch {torch.__version__}): "
                             f"torch.sum(x, dim=0, out=out), x [{partials}, {rows}, {n}] bf16, L2 overwritten before each "
                             "call, CUPTI kernel time"}
            b.add(row, b.flushed(lambda x=x, out=out: torch.sum(x, dim=0, out=out)), keep=not_flush)
            del x, out


def copy_rows(b, torch, quick):
    for mib in ((1, 16, 256, 1024) if not quick else (16,)):
        src = torch.empty(mib * 1048576, device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        row = {"kind": "local_copy", "name": f"local copy {mib} MiB", "bytes": mib * 1048576,
               "source": f"this file's run ({torch.cuda.get_device_name()}, torch {torch.__version__}): "
                         "dst.copy_(src) on one GPU (ATen's device-to-device memcpy), L2 overwritten before each "
                         "call, CUPTI time"}
        b.add(row, b.flushed(lambda s=src, d=dst: d.copy_(s)), keep=not_flush)
        del src, dst


def indexing_rows(b, torch, quick):
    """The indexing kernels eager torchtitan's MoE and MLA run (tpsim's step/eager_moe_kernels.cpp and
    mla_cat_kernels), at DeepSeek-V3 16B's shapes on one of 8 EP ranks: 16,384 tokens of 2,048, top 6
    of 64 experts, 16 heads of 192 (128 + 64 rotary), and at other token counts and widths. Each row
    says the loop tpsim prices it in (vectorized: streams; strided, index, scatter, cat: bound per
    element), so `tpsim calibrate` can fit each loop's rate and `tpsim validate` check it."""
    # DeepSeek-V3 16B's width (2,048) at the step's token count first, then other token counts and
    # DeepSeek-V3 671B's width (7,168): rows to fit a loop's rate on and rows to check it on.
    shapes = [(16384, 2048), (4096, 2048), (65536, 2048), (4096, 7168), (16384, 7168)]
    for tokens, hidden in (shapes if not quick else [(2048, 2048)]):
        indexing_shape_rows(b, torch, quick, tokens, hidden)
        torch.cuda.empty_cache()


def indexing_shape_rows(b, torch, quick, tokens, hidden):
    experts, top_k, heads = 64, 6, 16
    slots, row = tokens * top_k, hidden * 2
    dev, bf16 = "cuda", torch.bfloat16
    src = run_source(torch)
    # Token slots in expert order, as torchtitan's TokenReorderer makes them.
    picks = torch.randint(0, experts, (tokens, top_k), device=dev)
    token_of_slot = torch.argsort(picks.view(-1), stable=True) // top_k
    index = token_of_slot.view(-1, 1).expand(-1, hidden)
    x = torch.randn(tokens, hidden, device=dev, dtype=bf16)
    routed = torch.randn(slots, hidden, device=dev, dtype=bf16)
    gathered = torch.empty_like(routed)
    summed = torch.zeros(tokens, hidden, device=dev, dtype=bf16)
    perm = torch.randperm(slots, device=dev)
    permuted = torch.empty_like(routed)
    scores = torch.rand(slots, 1, device=dev, dtype=torch.float32)
    routed32 = routed.float()
    q = torch.randn(tokens, heads, 192, device=dev, dtype=bf16)
    q_nope, q_pe = torch.split(q, [128, 64], dim=-1)

    def put():
        permuted[perm] = routed

    n, joined = slots * hidden, tokens * heads * 192
    cases = [
        ("gather of token rows into slots (expanded index)", "torch.gather(x, 0, index, out=...)",
         lambda: torch.gather(x, 0, index, out=gathered), slots * (row + 8), slots * row, n, "vectorized"),
        ("index of slot rows (x[perm])", "routed[perm]", lambda: routed[perm], slots * (row + 8), slots * row, n, "vectorized"),
        ("index_put_ of slot rows (out[perm] = src)", "permuted[perm] = routed", put, slots * (row + 8), slots * row, n, "index"),
        ("scatter_add_ of slot rows into tokens", "summed.scatter_add_(0, index, routed)",
         lambda: summed.scatter_add_(0, index, routed), slots * (row + 8), slots * row, n, "scatter"),
        ("fp32 product by a per-row score", "routed32 * scores", lambda: routed32 * scores, n * 4 + slots * 4, n * 4, n, "strided"),
        ("cat of split views (MLA's query)", "torch.cat([q_nope, q_pe], dim=-1)", lambda: torch.cat([q_nope, q_pe], dim=-1),
         joined * 2, joined * 2, joined, "cat"),
    ]
    for name, op, fn, read, written, elements, loop in (cases if not quick else cases[:2]):
        operands = 3 if loop == "strided" else None  # the output, the rows and the per-row scores
        b.add(elementwise_row(f"{name} bf16, {tokens} tokens x {hidden}", read, written, elements, loop, operands,
                              source=src.format(op=op)), b.flushed(fn), keep=not_flush)
    del x, routed, gathered, summed, permuted, routed32, q


def strided_rows(b, torch, quick):
    """ATen's legacy strided loop (elementwise_kernel<128, 4> for 2-byte outputs, <128, 2> for wider
    ones) with 2, 3 and 4 operands (the output and the inputs whose offsets it computes per
    element: an expanded copy, a product with a broadcast operand, addcmul with one), bf16 and
    fp32, at two sizes: what tpsim's per-operand strided rate is checked on."""
    dev = "cuda"
    src = run_source(torch)
    sizes = ((8192, 4096), (2048, 4096)) if not quick else ((1024, 1024),)
    for rows, width in sizes:
        n = rows * width
        for dtype, e in ((torch.bfloat16, 2), (torch.float32, 4)):
            name = "bf16" if e == 2 else "fp32"
            x = torch.randn(rows, width, device=dev, dtype=dtype)
            y = torch.randn(rows, width, device=dev, dtype=dtype)
            w = torch.randn(width, device=dev, dtype=dtype)
            r = torch.randn(rows, 1, device=dev, dtype=dtype)
            kv = torch.randn(rows // 4, 1, width, device=dev, dtype=dtype)
            cases = [
                ("expand copy of a row per 4", "kv.expand(-1, 4, -1).reshape(-1, width)",
                 lambda kv=kv: kv.expand(-1, 4, -1).reshape(-1, width), n * e // 4, n * e, 2, 3),
                ("expand copy of a column", "r.expand(-1, width).contiguous()",
                 lambda r=r: r.expand(-1, width).contiguous(), rows * e, n * e, 2, 2),
                ("product with a broadcast row", "x * w", lambda x=x, w=w: x * w, n * e + width * e, n * e, 3, 2),
                ("product with a broadcast column", "x * r", lambda x=x, r=r: x * r, n * e + rows * e, n * e, 3, 2),
                ("addcmul with a broadcast row", "torch.addcmul(x, y, w)", lambda x=x, y=y, w=w: torch.addcmul(x, y, w),
                 2 * n * e + width * e, n * e, 4, 2),
            ]
            for what, op, fn, read, written, operands, dims in cases:
                b.add(elementwise_row(f"{what} {name}, {rows} x {width}", read, written, n, "strided", operands, dims,
                                      src.format(op=op)), b.flushed(fn), keep=not_flush)
            del x, y, w, r, kv
        torch.cuda.empty_cache()


def strided_dims_rows(b, torch, quick):
    """Expanded copies in ATen's legacy loop by how many dimensions its offset calculator keeps
    after merging (2, 3, 5) and by the innermost size: repeat_kv's own shape (8 KV heads of 128
    repeated 4 times), a row of 4,096 repeated, a 2-D broadcast row, a 5-D expand. Validation rows
    for a per-dimension cost (tpsim prices the loop per operand only)."""
    dev, bf16, e = "cuda", torch.bfloat16, 2
    src = run_source(torch)
    t = 16384 if not quick else 1024
    kv = torch.randn(t, 8, 1, 128, device=dev, dtype=bf16)
    line = torch.randn(t // 4, 1, 4096, device=dev, dtype=bf16)
    w = torch.randn(1, 4096, device=dev, dtype=bf16)
    cube = torch.randn(t // 16, 1, 8, 1, 128, device=dev, dtype=bf16)
    cases = [
        ("repeat_kv's expand (3 dims, 128 inner)", "kv.expand(-1, -1, 4, -1).reshape(t, 32, 128)",
         lambda: kv.expand(-1, -1, 4, -1).reshape(t, 32, 128), t * 8 * 128, t * 32 * 128, 3),
        ("a row repeated 4 times (3 dims, 4,096 inner)", "line.expand(-1, 4, -1).reshape(t, 4096)",
         lambda: line.expand(-1, 4, -1).reshape(t, 4096), t // 4 * 4096, t * 4096, 3),
        ("a broadcast row (2 dims)", "w.expand(t, -1).contiguous()", lambda: w.expand(t, -1).contiguous(), 4096, t * 4096, 2),
        ("an expand over two axes (5 dims)", "cube.expand(-1, 4, -1, 4, -1).reshape(t // 16, 4, 32, 128)",
         lambda: cube.expand(-1, 4, -1, 4, -1).reshape(t // 16, 4, 32, 128), t // 16 * 8 * 128, t * 8 * 128, 5),
    ]
    for what, op, fn, read_elems, out_elems, dims in (cases if not quick else cases[:1]):
        b.add(elementwise_row(f"expand copy: {what} bf16, {out_elems} elements", read_elems * e, out_elems * e, out_elems,
                              "strided", 2, dims, src.format(op=op)), b.flushed(fn), keep=not_flush)
    del kv, line, w, cube


def grouped_fp8_rows(b, torch, quick):
    """torch._scaled_grouped_mm as torchao's _Float8GroupedMM runs fp8 experts forward (rowwise
    scales, use_fast_accum), at DeepSeek-V3 16B's expert shapes on one of 8 EP ranks. Validation
    rows: tpsim prices fp8 grouped GEMMs as batched ones."""
    dev = "cuda"
    src = run_source(torch, "balanced experts, random normal data, ")
    cases = [(8, rows, 2048, 1408) for rows in (1536, 6144, 12288)]
    for experts, rows, k, n in (cases if not quick else cases[:1]):
        offs = torch.arange(rows, rows * experts + 1, rows, device=dev, dtype=torch.int32)
        a = torch.randn(rows * experts, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(experts, n, k, device=dev).to(torch.float8_e4m3fn)
        sa = torch.ones(rows * experts, device=dev, dtype=torch.float32)
        sb = torch.ones(experts, n, device=dev, dtype=torch.float32)
        fn = (lambda a=a, w=w, sa=sa, sb=sb, offs=offs: torch._scaled_grouped_mm(
            a, w.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True))
        row = {"kind": "gemm", "name": f"scaled grouped forward {experts} x {rows}x{n}x{k} fp8", "m": rows, "n": n, "k": k,
               "batch": experts, "grouped": True, "dtype": "fp8",
               "source": src.format(op="torch._scaled_grouped_mm(a, w.transpose(-2, -1), rowwise scales, offs, bf16 out, fast accum)")}
        b.add(row, b.flushed(fn), keep=not_flush)
        del a, w, sa, sb


def grouped_rows(b, torch, quick):
    """torch._grouped_mm as eager torchtitan's MoE runs its experts (0cfbd0b models/moe.py
    _run_experts_grouped_mm: x @ w.transpose(-2, -1) per expert, the experts' rows back to back,
    `offs` their ends), forward and the two gradients autograd asks for (derivatives.yaml:
    _grouped_mm_mat1_backward, _grouped_mm_mat2_backward), each beside torch.bmm of the same
    shapes (what tpsim prices a grouped GEMM as). Rows are `gemm` rows with a batch: the experts.
    Shapes: DeepSeek-V3 16B's experts on one of 8 EP ranks (8 experts, dim 2,048, hidden 1,408) at
    three loads, and DeepSeek-V3 671B's (32 experts, 7,168 by 2,048)."""
    dev, bf16 = "cuda", torch.bfloat16
    src = run_source(torch, "balanced experts, random normal data, ")
    cases = [(8, rows, 2048, 1408) for rows in (1536, 6144, 12288)] + [(32, 2048, 7168, 2048)]
    if quick:
        cases = cases[:1]
    for experts, rows, dim, hidden in cases:
        offs = torch.arange(rows, rows * experts + 1, rows, device=dev, dtype=torch.int32)
        for name, k, n in (("w1", dim, hidden), ("w2", hidden, dim)):
            x = torch.randn(rows * experts, k, device=dev, dtype=bf16)
            w = torch.randn(experts, n, k, device=dev, dtype=bf16)  # nn.Parameter [E, out, in]
            g = torch.randn(rows * experts, n, device=dev, dtype=bf16)
            xb, gb = x.view(experts, rows, k), g.view(experts, rows, n)
            runs = [
                ("forward", (rows, n, k), "torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)",
                 lambda x=x, w=w: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs),
                 lambda xb=xb, w=w: torch.bmm(xb, w.transpose(-2, -1))),
                ("input gradient", (rows, k, n), "torch._grouped_mm(grad, w, offs=offs)",
                 lambda g=g, w=w: torch._grouped_mm(g, w, offs=offs),
                 lambda gb=gb, w=w: torch.bmm(gb, w)),
                ("weight gradient", (n, k, rows), "torch._grouped_mm(grad.t(), x, offs=offs)",
                 lambda g=g, x=x: torch._grouped_mm(g.t(), x, offs=offs),
                 lambda gb=gb, xb=xb: torch.bmm(gb.transpose(-2, -1), xb)),
            ]
            for what, (m, nn, kk), op, grouped, batched in runs:
                for impl, fn, opname in (("grouped", grouped, op), ("bmm", batched, "torch.bmm of the same shapes")):
                    row = {"kind": "gemm", "name": f"{impl} {name} {what} {experts} x {m}x{nn}x{kk} bf16",
                           "m": m, "n": nn, "k": kk, "batch": experts, "dtype": "bf16", "source": src.format(op=opname)}
                    if impl == "grouped":
                        row["grouped"] = True
                    b.add(row, b.flushed(fn), keep=not_flush)
            del x, w, g, xb, gb
        torch.cuda.empty_cache()
    if not quick:
        skewed_grouped_rows(b, torch)


def skewed_grouped_rows(b, torch):
    """torch._grouped_mm over experts of unequal loads (one hot expert), as skewed routing gives
    torchtitan's MoE: one kernel, `offs` marking each expert's rows. Rows carry `group_sizes`
    (along m; along k, `"ragged": "k"`, for the weight gradient); m or k is their mean rounded
    down, as PyTorch's dispatch computes it."""
    dev, bf16 = "cuda", torch.bfloat16
    src = run_source(torch, "unequal experts, random normal data, ")
    dim, hidden = 2048, 1408  # DeepSeek-V3 16B's w1 on one of 8 EP ranks
    for sizes in ([12288] + [6144] * 7, [24576] + [2048] * 7):
        experts, total = len(sizes), sum(sizes)
        offs = torch.tensor(sizes, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        x = torch.randn(total, dim, device=dev, dtype=bf16)
        w = torch.randn(experts, hidden, dim, device=dev, dtype=bf16)
        g = torch.randn(total, hidden, device=dev, dtype=bf16)
        mean = total // experts
        runs = [
            ("forward", (mean, hidden, dim), "m", "torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)",
             lambda x=x, w=w, offs=offs: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)),
            ("weight gradient", (hidden, dim, mean), "k", "torch._grouped_mm(grad.t(), x, offs=offs)",
             lambda g=g, x=x, offs=offs: torch._grouped_mm(g.t(), x, offs=offs)),
        ]
        for what, (m, n, k), ragged, op, fn in runs:
            row = {"kind": "gemm", "name": f"grouped w1 {what} {experts} experts of {sizes[0]} and {sizes[1]} rows bf16",
                   "m": m, "n": n, "k": k, "batch": experts, "grouped": True, "group_sizes": sizes, "dtype": "bf16",
                   "source": src.format(op=op)}
            if ragged == "k":
                row["ragged"] = "k"
            b.add(row, b.flushed(fn), keep=not_flush)
        del x, w, g
        torch.cuda.empty_cache()


def attention_rows(b, torch, quick):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    cudnn = b.args.attention_backend == "cudnn"
    backend = SDPBackend.CUDNN_ATTENTION if cudnn else SDPBackend.FLASH_ATTENTION
    impl = "cudnn" if cudnn else "flash2"
    cases = [(2, 8192, 16, 16, (False, True)), (1, 8192, 32, 8, (False, True)), (1, 8192, 8, 1, (False, True)),
             (4, 4096, 32, 8, (False, True)), (8, 2048, 32, 8, (False, True))]
    if quick:
        cases = cases[:1]
    if b.args.long_attention:
        cases += [(1, seq, 32, 8, (True,)) for seq in (32768, 65536, 131072)]
    for (batch, seq, heads, kv, causals) in cases:
        for causal in causals:
            if cudnn:  # K and V repeated out to every query head first, as torchtitan's repeat_kv does
                kv = heads
            q = torch.randn(batch, heads, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(batch, kv, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(batch, kv, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def fwd(q=q, k=k, v=v, causal=causal):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv != heads)
            try:
                o = fwd()
            except Exception as e:
                b.failed.append({"name": f"sdpa b{batch} s{seq} h{heads}/{kv}", "error": str(e)[:300]})
                continue
            g = torch.randn_like(o)

            def bwd(o=o, g=g, q=q, k=k, v=v):
                torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
            base = {"kind": "attention", "implementation": impl, "batch": batch, "seq_len": seq, "heads": heads,
                    "kv_heads": kv, "head_dim": 128, "causal": causal, "dtype": "bf16"}
            src = (f"this file's run ({torch.cuda.get_device_name()}, torch {torch.__version__}): "
                   + ("F.scaled_dot_product_attention with SDPBackend.CUDNN_ATTENTION (cuDNN's fused attention), "
                      "cudnn kernels' CUPTI time" if cudnn else
                      "F.scaled_dot_product_attention with SDPBackend.FLASH_ATTENTION (PyTorch's FlashAttention-2), "
                      "flash kernels' CUPTI time"))
            # Backward: the main kernel and the two around it (dO.O and the dQ conversion), both backends.
            ours = (lambda name: "cudnn" in name.lower()) if cudnn else (lambda name: "flash" in name.lower())
            b.add(dict(base, **{"pass": "forward", "source": src,
                                "name": f"sdpa {impl} fwd b{batch} s{seq} h{heads}/{kv}{' causal' if causal else ''}"}),
                  fwd, keep=ours, repeat=5)
            b.add(dict(base, **{"pass": "backward", "source": src,
                                "name": f"sdpa {impl} bwd b{batch} s{seq} h{heads}/{kv}{' causal' if causal else ''}"}),
                  bwd, keep=ours, repeat=5)
            del q, k, v, o, g


def launch_gaps(b, torch):
    """Device-side gap between back-to-back tiny kernels whose launches wait in the queue
    (eager, host ahead) and inside a CUDA graph: median start-to-previous-end, us."""
    a = torch.randn(16, device="cuda")
    c = torch.empty_like(a)
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    out = {}

    def not_gemm(ks):  # the kernels after the GEMM that keeps the GPU busy while the host queues them
        return [k for k in ks if "nvjet" not in k[0] and "gemm" not in k[0].lower()]

    def gaps(ks):
        tiny = not_gemm(ks)
        g = [tiny[i + 1][1] - tiny[i][2] for i in range(len(tiny) - 1)]
        d = [k[2] - k[1] for k in tiny]
        return round(statistics.median(g), 3), round(statistics.median(d), 3)

    def taking_turns(first, second, times):  # queued behind a GEMM: first, second, first, ...
        def run():
            torch.mm(big, big)
            for _ in range(times):
                first()
                second()
        return not_gemm(b.kernels(run, 1))

    def tiny_add():
        torch.add(a, a, out=c)
    out["queued tiny kernels: gap, duration (us)"] = gaps(taking_turns(tiny_add, tiny_add, 50))
    other = torch.cuda.Stream()

    def across_streams():  # each tiny kernel waits for the previous one on the other stream
        torch.mm(big, big)
        main = torch.cuda.current_stream()
        for i in range(50):
            other.wait_stream(main)
            with torch.cuda.stream(other):
                torch.add(a, a, out=c)
            main.wait_stream(other)
            torch.add(a, a, out=c)
    out["tiny kernels alternating streams through events: gap, duration (us)"] = gaps(b.kernels(across_streams, 1))

    # Why two different kernels wait longer than one kernel launched again (launch.device_latency
    # against repeat_latency in the hardware files): two different tiny kernels taking turns, and a
    # kernel over all SMs taking turns with a tiny one (the gap after each of them).
    m = torch.empty_like(a)
    wide_in = torch.randn(1 << 22, device="cuda")  # 16 MiB: thousands of blocks over every SM
    wide_out = torch.empty_like(wide_in)

    def tiny_mul():
        torch.mul(a, a, out=m)
    out["two different tiny kernels taking turns: gap, duration (us)"] = gaps(taking_turns(tiny_add, tiny_mul, 50))
    ks = taking_turns(lambda: torch.mul(wide_in, wide_in, out=wide_out), tiny_add, 40)
    after = {True: [], False: []}  # the gap after the wide kernel, after the tiny one
    for k, nxt in zip(ks, ks[1:]):
        after[k[2] - k[1] > nxt[2] - nxt[1]].append(nxt[1] - k[2])
    if after[True] and after[False]:
        out["a 16 MiB kernel and a tiny one taking turns: gap after the wide one, after the tiny one (us)"] = [
            round(statistics.median(after[True]), 3), round(statistics.median(after[False]), 3)]

    # A same-device copy_ (cudaMemcpyAsync: the profiler's "Memcpy DtoD") between tiny kernels, as
    # async TP's steps put a shard's copy between submatmuls: the gap from a kernel's end to the
    # copy's start, the copy's time, and the gap from its end to the next kernel's start.
    def copy_gaps(ks):
        g_in, g_out, d = [], [], []
        for i in range(1, len(ks) - 1):
            if "Memcpy" in ks[i][0] and "Memcpy" not in ks[i - 1][0] and "Memcpy" not in ks[i + 1][0]:
                g_in.append(ks[i][1] - ks[i - 1][2])
                d.append(ks[i][2] - ks[i][1])
                g_out.append(ks[i + 1][1] - ks[i][2])
        if not d:
            return None
        return [round(statistics.median(x), 3) for x in (g_in, d, g_out)]

    for mib in (1, 4):
        src = torch.empty(mib << 18, device="cuda")  # float32: 2^18 elements a MiB
        dst = torch.empty_like(src)

        def kernel_copy_kernel(src=src, dst=dst):
            torch.mm(big, big)
            for _ in range(40):
                torch.add(a, a, out=c)
                dst.copy_(src)
            torch.add(a, a, out=c)

        def copy_across_streams(src=src, dst=dst):  # each copy waits for the other stream's kernel
            torch.mm(big, big)
            main = torch.cuda.current_stream()
            for _ in range(40):
                torch.add(a, a, out=c)
                other.wait_stream(main)
                with torch.cuda.stream(other):
                    dst.copy_(src)
                main.wait_stream(other)
            torch.add(a, a, out=c)
        ks = not_gemm(b.kernels(kernel_copy_kernel, 1))
        out[f"tiny kernel, {mib} MiB copy_, tiny kernel on one stream: gap in, copy, gap out (us)"] = copy_gaps(ks)
        ks = not_gemm(b.kernels(copy_across_streams, 1))
        out[f"tiny kernel, {mib} MiB copy_ on the other stream through events, tiny kernel: gap in, copy, gap out (us)"] = copy_gaps(ks)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.add(a, a, out=c)
        with torch.cuda.graph(g):
            for _ in range(100):
                torch.add(a, a, out=c)
    torch.cuda.current_stream().wait_stream(s)
    out["CUDA graph tiny kernels: gap, duration (us)"] = gaps(b.kernels(g.replay, 1))
    return out


def clocks(torch):
    """SM clock and power while a GEMM runs back to back (NVML), for big and thin shapes."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception as e:
        return {"error": str(e)[:200]}
    out = {}
    cases = (("bf16 8192^3", torch.bfloat16, 8192, 8192, 8192), ("bf16 1024x6656x8192", torch.bfloat16, 1024, 6656, 8192),
             ("bf16 256x6656x8192", torch.bfloat16, 256, 6656, 8192), ("fp32 4096^3", torch.float32, 4096, 4096, 4096))
    for name, dt, m, n, k in cases:
        x = torch.randn(m, k, device="cuda", dtype=dt)
        w = torch.randn(n, k, device="cuda", dtype=dt)
        flops = 2.0 * m * n * k
        per = max(1, int(2e12 / flops))  # about 2-5 ms of work between samples
        sm, mhz_mem, watts = [], [], []
        t_end = time.time() + 1.5
        while time.time() < t_end:
            for _ in range(per):
                torch.mm(x, w.t())
            torch.cuda.synchronize()
            sm.append(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
            watts.append(pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
        half = len(sm) // 2  # the second half: the clock has settled
        out[name] = {"sm_mhz": round(statistics.median(sm[half:])), "watts": round(statistics.median(watts[half:]))}
        del x, w
    return out


def host_costs(torch):
    """Host time per eager op when the host, not the GPU, is the bottleneck (tiny tensors)."""
    a = torch.randn(16, device="cuda")
    c = torch.empty_like(a)
    x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    out = {}
    for name, fn in (("eager add (out=)", lambda: torch.add(a, a, out=c)),
                     ("eager mm 64x64x64 bf16", lambda: torch.mm(x, x)),
                     ("event record + wait", None)):
        if fn is None:
            s = torch.cuda.Stream()
            ev = torch.cuda.Event()

            def fn(s=s, ev=ev):
                ev.record()
                s.wait_event(ev)
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(2000):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            samples.append((t1 - t0) / 2000 * 1e6)
        out[name] = round(statistics.median(samples), 3)
    return out


def gpu_events(torch, run, with_cpu=True):
    """What `run` put on the GPU, as the profiler's Chrome-trace events (kernels, memcpys, memsets)."""
    acts = [torch.profiler.ProfilerActivity.CUDA] + ([torch.profiler.ProfilerActivity.CPU] if with_cpu else [])
    with torch.profiler.profile(activities=acts) as prof:
        run()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    return [e for e in trace.get("traceEvents", [])
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def init_one_gpu_group(torch, dist, port):
    """A NCCL process group of this one GPU (world size 1); returns its name."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    return dist.group.WORLD.group_name


def kraken_bench(torch, fn, warmup, iters, sleep_cycles, cache):
    """meta-pytorch/kraken's benchmark_with_event (kraken/_logging/benchmarking.py at 1cb1314):
    `warmup` calls, a GPU sleep of `sleep_cycles`, then `iters` x (overwrite `cache`, begin
    event, call, end event). Returns the median span (us) and the host's issue time per call
    (us, flush and events included): while the host issues a call faster than the sleep lasts
    divided by `iters`, every span is GPU time; past that, the later spans time the host."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    begin = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda._sleep(int(sleep_cycles))
    t0 = time.perf_counter()
    for i in range(iters):
        cache.zero_()
        begin[i].record()
        fn()
        end[i].record()
    host_us = (time.perf_counter() - t0) / iters * 1e6
    torch.cuda.synchronize()
    return statistics.median(b.elapsed_time(e) for b, e in zip(begin, end)) * 1000.0, host_us


def import_torch_with_cuda(tool):
    """PyTorch, or None after one line on stderr when it or a CUDA GPU is missing (the tool exits 3)."""
    try:
        import torch
    except ImportError:
        print(f"{tool}: PyTorch is not installed", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{tool}: no CUDA GPU", file=sys.stderr)
        return None
    return torch


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_op_bench")
    if torch is None:
        return 3
    b = Bench(torch, args)
    t0 = time.time()
    props = torch.cuda.get_device_properties(0)
    host = {}

    def save():  # after every part, so a run cut short keeps what it measured
        description = (f"Op-level timings on one {props.name} ({props.multi_processor_count} SMs, "
                       f"{props.total_memory / 2**30:.1f} GiB), torch {torch.__version__}, CUDA {torch.version.cuda}, "
                       f"by tools/torch_op_bench.py. Host cost per eager call (host-bound, us), launch gaps and clocks: {json.dumps(host)}.")
        b.write(args.output, args.hardware, description)

    parts = {"gemm": gemm_rows, "reduction": reduction_rows, "copy": copy_rows, "attention": attention_rows,
             "indexing": indexing_rows, "grouped": grouped_rows, "strided": strided_rows,
             "strided_dims": strided_dims_rows, "grouped_fp8": grouped_fp8_rows}
    for part in (parts[name] for name in parts if name in args.parts.split(",")):
        print(f"{part.__name__} ({time.time() - t0:.0f} s)", flush=True)
        part(b, torch, args.quick)
        torch.cuda.empty_cache()
        save()
    host.update(host_costs(torch))
    print("host cost per eager call (us):", host, flush=True)
    for name, fn in (("launch gaps", lambda: launch_gaps(b, torch)), ("clocks", lambda: clocks(torch))):
        try:
            host[name] = fn()
        except Exception as e:
            host[name] = {"error": str(e)[:200]}
        print(name, host[name], flush=True)
    save()
    print(f"wrote {len(b.rows)} rows to {args.output} ({len(b.failed)} failed) in {time.time() - t0:.0f} s")
    if args.kineto:
        torch.backends.cuda.matmul.allow_tf32 = False
        xs = [(torch.randn(m, 8192, device="cuda", dtype=torch.bfloat16), torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16))
              for m in (256, 1024, 4096)]
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            for _ in range(5):
                for x, w in xs:
                    torch.mm(x, w)
            torch.cuda.synchronize()
        prof.export_chrome_trace(args.kineto)
    return 0


if __name__ == "__main__":
    sys.exit(main())
