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

With --long SECONDS it instead runs w1's GEMM (operands as a freshly initialized model has them)
back to back for that long and writes one row per second: the GEMM's median time, the SM clock,
the board power, the GPU's temperature and NVML's clock-event reasons, so that what minutes of
load do to the clock (a GPU heating at its power limit) shows apart from the first seconds',
which the other cases time. Then the GPU idles --cool seconds and the GEMM runs 3 s more.

    python3 tools/torch_gemm_clock_bench.py -o gemm_clock.json [--seconds 1.5] [--duty] [--long 150 --cool 20]

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


# nvidia-smi's names for the temperature and the clock-event reasons (older drivers: throttle).
EXTRA_FIELDS = [("temperature.gpu", "temperature.memory", "clocks_event_reasons.active"),
                ("temperature.gpu", "temperature.memory", "clocks_throttle_reasons.active")]


def supported_extra_fields():
    for fields in EXTRA_FIELDS:
        q = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                           capture_output=True, text=True)
        if q.returncode == 0:
            return list(fields)
    return []


class Sampler:
    """nvidia-smi's SM clock (MHz) and board power (W), and where asked the temperatures (C) and
    the clock-event reasons (a bit mask), sampled every 20 ms into tagged lists of tuples."""

    def __init__(self, extra=()):
        self.tag, self.samples, self.stop = None, {}, False
        self.fields = ["clocks.sm", "power.draw"] + list(extra)
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=" + ",".join(self.fields), "--format=csv,noheader,nounits", "-lms", "20"],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            if self.tag is None:
                continue
            try:
                values = tuple(int(x, 16) if x.strip().startswith("0x") else float(x) for x in line.strip().split(","))
            except ValueError:
                continue
            if len(values) == len(self.fields):
                self.samples.setdefault(self.tag, []).append(values)

    def close(self):
        self.proc.terminate()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--seconds", type=float, default=1.5, help="each case's timed span (after 0.5 s of the same calls)")
    p.add_argument("--duty", action="store_true", help="also wq's GEMM between copies of 0.25-4 GiB, and the copy alone")
    p.add_argument("--long", type=float, default=0, help="instead: w1's GEMM back to back this many seconds, a row a second")
    p.add_argument("--cool", type=float, default=20, help="with --long: seconds idle before 3 s more of the GEMM")
    a = p.parse_args()
    torch = import_torch_with_cuda("torch_gemm_clock_bench")
    if torch is None:
        return 3
    if a.long > 0:
        return long_run(torch, a)
    sampler = Sampler()
    copy_src = torch.empty(4 * 2**30 // 2, dtype=torch.bfloat16, device="cuda").normal_()
    copy_dst = torch.empty_like(copy_src)
    rows = []

    def case(tag, gemm, copy_gib, meta):
        """`gemm` (or None) and a `copy_gib` GiB copy (or none) after it, over and over; the GEMM's
        (else the copy's) median CUDA-event time and the clock and power meanwhile."""
        src, dst = copy_src[: int(copy_gib * 2**30) // 2], copy_dst[: int(copy_gib * 2**30) // 2]

        def between():
            if copy_gib > 0:
                dst.copy_(src)
        end_warm = time.perf_counter() + 0.5
        while time.perf_counter() < end_warm:
            if gemm:
                gemm()
            between()
            torch.cuda.synchronize()
        sampler.tag = tag
        spans, end = [], time.perf_counter() + a.seconds
        while time.perf_counter() < end:
            evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
            for b, e in evs:
                b.record()
                gemm() if gemm else between()
                e.record()
                if gemm:
                    between()
            torch.cuda.synchronize()
            spans += [b.elapsed_time(e) * 1000.0 for b, e in evs]
        sampler.tag = None
        us = statistics.median(spans)
        samples = sampler.samples.get(tag, [])
        row = meta | {"copy_gib_between": copy_gib, "us": round(us, 2), "calls": len(spans),
                      "sm_mhz": round(statistics.mean(x[0] for x in samples), 1) if samples else None,
                      "power_w": round(statistics.mean(x[1] for x in samples), 1) if samples else None, "samples": len(samples)}
        if gemm:
            m, n, k = meta["shape"]
            row["tflops"] = round(2.0 * m * n * k / us / 1e6, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)

    for m, n, k in SHAPES:
        for data, (act_std, w_std) in DATA.items():
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) * act_std
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * w_std
            for copy_gib in (0, 1):  # back to back, or a 1 GiB copy (~0.5-0.7 ms) between GEMMs
                case(f"{m}x{n}x{k} {data} {copy_gib}", lambda x=x, w=w: torch.mm(x, w), copy_gib,
                     {"shape": [m, n, k], "data": data, "schedule": "interleaved" if copy_gib else "back_to_back"})
    if a.duty:
        # wq's GEMM (randn) between copies of a growing size: the GEMM's share of the time falls,
        # and with it the power it must share; then the copy alone (its own power).
        m, n, k = SHAPES[1]
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for copy_gib in (0.25, 0.5, 2, 4):
            case(f"duty {copy_gib}", lambda: torch.mm(x, w), copy_gib, {"shape": [m, n, k], "data": "randn", "schedule": "interleaved"})
        for copy_gib in (1, 4):
            case(f"copy {copy_gib}", None, copy_gib, {"kernel": "copy alone", "schedule": "back_to_back"})
    sampler.close()
    props = torch.cuda.get_device_properties(0)
    doc = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "what": "one bf16 torch.mm by operand magnitude and by what runs between calls, with the SM clock and power meanwhile",
           "rows": rows}
    write_atomic(a.output, json.dumps(doc, indent=1) + "\n")
    return 0


def long_run(torch, a):
    """w1's GEMM back to back for a.long seconds, then idle a.cool seconds, then 3 s more: a row
    per second of its median CUDA-event time with the clock, power, temperatures and reasons."""
    extra = supported_extra_fields()
    sampler = Sampler(extra)
    m, n, k = SHAPES[0]
    act_std, w_std = DATA["init_weights"]
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) * act_std
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * w_std
    torch.mm(x, w)
    torch.cuda.synchronize()
    rows = []

    def phase(name, seconds, t_offset):
        start = time.perf_counter()
        windows = {}
        while (elapsed := time.perf_counter() - start) < seconds:
            second = int(elapsed)
            sampler.tag = (name, second)
            evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
            for b, e in evs:
                b.record()
                torch.mm(x, w)
                e.record()
            torch.cuda.synchronize()
            windows.setdefault(second, []).extend(b.elapsed_time(e) * 1000.0 for b, e in evs)
        sampler.tag = None
        for second, spans in sorted(windows.items()):
            samples = sampler.samples.get((name, second), [])
            us = statistics.median(spans)
            row = {"phase": name, "t_s": t_offset + second, "us": round(us, 2), "calls": len(spans),
                   "tflops": round(2.0 * m * n * k / us / 1e6, 1), "samples": len(samples)}
            for i, field in enumerate(sampler.fields):
                values = [s[i] for s in samples]
                if not values:
                    continue
                if field.startswith("clocks_"):  # a bit mask: every reason seen in the second
                    mask = 0
                    for v in values:
                        mask |= int(v)
                    row["clock_event_reasons"] = hex(mask)
                else:
                    key = {"clocks.sm": "sm_mhz", "power.draw": "power_w", "temperature.gpu": "gpu_temp_c",
                           "temperature.memory": "memory_temp_c"}[field]
                    row[key] = round(statistics.mean(values), 1)
            rows.append(row)
            print(json.dumps(row), flush=True)

    phase("load", a.long, 0)
    time.sleep(a.cool)
    phase("after_idle", 3, int(a.long + a.cool))
    sampler.close()
    props = torch.cuda.get_device_properties(0)
    doc = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "what": (f"Llama 3 8B's w1 ({m}x{n}x{k}, bf16 torch.mm, freshly initialized weights) back to back for "
                    f"{a.long:g} s, a row per second; then {a.cool:g} s idle and 3 s more"),
           "rows": rows}
    write_atomic(a.output, json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
