#!/usr/bin/env python3
"""Small memory-bound kernels on one GPU (copies and sums of stacked partials) across sizes,
each after a clean and after a dirty L2, as a tpsim measurement file.

Why: at 1-16 MiB such kernels run 20-50% slower than bytes / bandwidth, on H100 and H200 alike.
Two readings predict different things. A fixed start-up (a DRAM round trip before the first bytes
flow, block start and tail) costs the same after any L2 state; write-backs of dirty lines that
the L2 flush left behind (the op benches overwrite a buffer larger than L2 before each call, so
its last ~L2 of lines are dirty) add traffic that grows with the bytes the kernel touches until
the L2 is drained. Timing each op after a write flush (`dirty`, what torch_op_bench and kraken
do) and after a read flush (`clean`: the same buffer read, leaving clean lines) tells them apart.

    python3 tools/torch_memory_bound_bench.py --hardware h100_sxm -o memory_bound.json

Op-level rows (local_copy, reduction): `tpsim calibrate` may fit them. CUPTI device times, the
median over the repeats, the flush kernel left out. Needs PyTorch with CUDA and one GPU; exits 3
with one line when there is none.
"""
import argparse
import json
import statistics
import sys

from torch_op_bench import Bench, import_torch_with_cuda, write_measurements  # the op bench beside this file: its timing

SIZES_MIB = (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True, help="measurement file to write (atomically)")
    p.add_argument("--hardware", required=True, help="tpsim hardware model the GPU is (h100_sxm, h200, ...)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--settle", type=float, default=0.1, help="seconds of back-to-back calls before timing")
    p.add_argument("--warmup", type=int, default=3)
    return p.parse_args()


class Timer:
    def __init__(self, torch, args):
        self.bench = Bench(torch, args)  # settles the clock, then CUPTI records of kernels and memcpys
        self.args = args
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush_buffer = torch.empty(4 * l2 // 2, device="cuda", dtype=torch.bfloat16)
        self.flushes = {"dirty": lambda: self.flush_buffer.fill_(1), "clean": lambda: self.flush_buffer.amax()}
        self.flush_kernels = {k: self.count(f) for k, f in self.flushes.items()}

    def trace(self, fn, repeat):
        return self.bench.kernels(fn, repeat)

    def count(self, fn):
        return len(self.trace(fn, 4)) // 4

    def time_us(self, op, flush):
        """Median device time of op (its kernels summed), each call after `flush` ("none": back to back)."""
        skip = self.flush_kernels.get(flush, 0)
        pre = self.flushes.get(flush)

        def call():
            if pre:
                pre()
            op()
        ks = self.trace(call, self.args.repeat)
        per = len(ks) // self.args.repeat
        if per <= skip or len(ks) % self.args.repeat:
            raise RuntimeError(f"{len(ks)} kernels for {self.args.repeat} calls")
        times = [sum(e - s for _, s, e in ks[i * per + skip:(i + 1) * per]) for i in range(self.args.repeat)]
        return statistics.median(times)


def main():
    args = parse_args()
    torch = import_torch_with_cuda("torch_memory_bound_bench")
    if torch is None:
        return 3
    t = Timer(torch, args)
    gpu = f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    rows, warm = [], {}

    def add(row, op):
        for flush in ("clean", "dirty"):
            r = dict(row, name=f"{row['name']}, {flush} L2", source=row["source"] + f", {flush} L2 before each call", l2=flush)
            r["time_us"] = round(t.time_us(op, flush), 3)
            rows.append(r)
            print(f"  {r['name']}: {r['time_us']:.2f} us", flush=True)
        if row["bytes"] * (row.get("partials", 1) + 1) <= 16 * 2**20:  # fits L2: back to back, warm
            warm[row["name"]] = round(t.time_us(op, "none"), 3)

    for mib in SIZES_MIB:
        n = int(mib * 2**20)
        src = torch.empty(n, device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        add({"kind": "local_copy", "name": f"local copy {mib:g} MiB", "bytes": n,
             "source": f"this file's run ({gpu}): dst.copy_(src), CUPTI time"}, lambda s=src, d=dst: d.copy_(s))
        del src, dst
    for partials in (2, 4, 8):
        for mib in SIZES_MIB:
            n = int(mib * 2**20)
            x = torch.randn(partials, n // 2, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(n // 2, device="cuda", dtype=torch.bfloat16)
            add({"kind": "reduction", "name": f"aten sum of {partials} partials of {mib:g} MiB bf16", "partials": partials,
                 "bytes": n, "reduction": "aten_sum",
                 "source": f"this file's run ({gpu}): torch.sum(x, dim=0, out=out), x [{partials}, {n // 2}] bf16, CUPTI time"},
                lambda x=x, out=out: torch.sum(x, dim=0, out=out))
            del x, out
    props = torch.cuda.get_device_properties(0)
    write_measurements(args.output, args.hardware,
                       (f"Memory-bound kernels across sizes on one {props.name} ({props.multi_processor_count} SMs, "
                        f"L2 {props.L2_cache_size / 2**20:.0f} MiB), torch {torch.__version__}, by "
                        "tools/torch_memory_bound_bench.py: each op after a clean L2 (a read of a buffer of 4x L2) and "
                        "after a dirty one (the same buffer overwritten). Back to back with the operands in L2 (us, "
                        f"not rows): {json.dumps(warm)}"),
                       rows)
    print(f"wrote {len(rows)} rows to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
