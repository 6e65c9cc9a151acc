#!/usr/bin/env python3
"""How fast one large GEMM runs by what its operands hold and by what runs between its calls.

A GPU at its power limit lowers its SM clock, and a GEMM's power depends on how many bits its
operands toggle and on how long it has run without a pause. This times the same bf16 GEMM
(cuBLAS through torch.mm) with operands of four magnitudes (randn; randn weights x 0.02 as a
freshly initialized model has them; both x 0.02; zeros), each back to back for a while and
interleaved with a memory-bound copy (as a training step interleaves GEMMs with norms and
activations), and samples the SM clock and the board power with nvidia-smi meanwhile.

Output (JSON, written atomically): per case the GEMM's median CUDA-event time, its TFLOP/s, the
mean SM clock and power over the case. Op-level measurements: each row is one kernel's time.

    python3 tools/torch_gemm_clock_bench.py -o gemm_clock.json [--seconds 1.5]

Needs PyTorch with CUDA, one GPU and nvidia-smi; exits 3 with one line when there is none.
"""
import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

from torch_op_bench import import_torch_with_cuda, write_atomic  # the op bench beside this file: the same helpers

SHAPES = [(16384, 14336, 4096), (16384, 4096, 4096)]  # m, n, k: Llama 3 8B's w1 and wq on 2 x 8192 tokens
DATA = {"randn": (1.0, 1.0), "init_weights": (1.0, 0.02), "small": (0.02, 0.02), "zeros": (0.0, 0.0)}


class Sampler:
    """nvidia-smi's SM clock (MHz) and board power (W), sampled every 20 ms into tagged lists."""

    def __init__(self):
        self.tag, self.samples, self.stop = None, {}, False
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "20"],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            if self.tag is None:
                continue
            try:
                mhz, watts = (float(x) for x in line.strip().split(","))
            except ValueError:
                continue
            self.samples.setdefault(self.tag, []).append((mhz, watts))

    def close(self):
        self.proc.terminate()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--seconds", type=float, default=1.5, help="each case's timed span (after 0.5 s of the same calls)")
    a = p.parse_args()
    torch = import_torch_with_cuda("torch_gemm_clock_bench")
    if torch is None:
        return 3
    sampler = Sampler()
    copy_src = torch.empty(2**30 // 2, dtype=torch.bfloat16, device="cuda").normal_()
    copy_dst = torch.empty_like(copy_src)
    rows = []
    for m, n, k in SHAPES:
        for data, (act_std, w_std) in DATA.items():
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) * act_std
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * w_std
            for schedule in ("back_to_back", "interleaved"):
                def one():
                    torch.mm(x, w)
                    if schedule == "interleaved":  # a 1 GiB copy (~0.5-0.7 ms) between GEMMs
                        copy_dst.copy_(copy_src)
                end_warm = time.perf_counter() + 0.5
                while time.perf_counter() < end_warm:
                    one()
                    torch.cuda.synchronize()
                tag = f"{m}x{n}x{k} {data} {schedule}"
                sampler.tag = tag
                spans, end = [], time.perf_counter() + a.seconds
                while time.perf_counter() < end:
                    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
                    for b, e in evs:
                        b.record()
                        torch.mm(x, w)
                        e.record()
                        if schedule == "interleaved":
                            copy_dst.copy_(copy_src)
                    torch.cuda.synchronize()
                    spans += [b.elapsed_time(e) * 1000.0 for b, e in evs]
                sampler.tag = None
                us = statistics.median(spans)
                samples = sampler.samples.get(tag, [])
                row = {"shape": [m, n, k], "data": data, "schedule": schedule, "gemm_us": round(us, 2),
                       "tflops": round(2.0 * m * n * k / us / 1e6, 1), "calls": len(spans),
                       "sm_mhz": round(statistics.mean(s[0] for s in samples), 1) if samples else None,
                       "power_w": round(statistics.mean(s[1] for s in samples), 1) if samples else None,
                       "samples": len(samples)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    sampler.close()
    props = torch.cuda.get_device_properties(0)
    doc = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "what": "one bf16 torch.mm by operand magnitude and by what runs between calls, with the SM clock and power meanwhile",
           "rows": rows}
    write_atomic(a.output, json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
