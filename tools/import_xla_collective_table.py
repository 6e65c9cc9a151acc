#!/usr/bin/env python3
"""Turns XLA's measured collective throughput table into a tpsim measurement file.

XLA keeps measured NCCL collective throughputs per GPU in
xla/service/gpu/model/default_collective_perf_table.txtpb (earlier in
collective_interpolator_data.h): per key such as "sm_90" or "sm_100_B200", one entry per
HLO collective (opcode, F32 shape, replica groups over the 8 GPUs of one node) with
network_throughput_bytes_per_sec. xla/tools/collective_perf_table_gen.cc writes it as
tensor_size_bytes / median runtime of 20 runs, where tensor_size_bytes is the gathered
output of an all-gather, the input of a reduce-scatter and the buffer of an all-reduce or
all-to-all: the sizes nccl-tests and tpsim's "bytes" name. This takes the all-gathers,
reduce-scatters, all-reduces and all-to-alls of one key at --min-bytes and above (of the
--group-sizes asked for) and writes one row each ("gpus": the group size, "groups": how
many ran at once), with the source on every row. Smaller ones are left out: the runtime is
an XLA executable's, and below a few MiB it sits on a floor of 20-80 us that is the
runtime's launch, not NCCL (it does not grow with the size and jumps between neighbouring
sizes); from 256 MiB (the default) it is under 10%. Collective-permutes are left out too
(they run in a loop of 100 whose implementation changes with the size).

  tools/import_xla_collective_table.py default_collective_perf_table.txtpb --key sm_90 \
      --hardware h100_sxm --source "openxla/xla ... (commit, date)" -o out.json

--nvls off marks every row as run without NVLink SHARP, for a table whose all-reduces ran as
rings (sm_100_B200's: the bus bandwidth of its all-gathers, and faster over 4 GPUs than
over 8, as a ring and not NVLS is).
"""
import argparse
import json
import re
import sys

from torch_op_bench import write_atomic  # the op bench beside this file: the whole file or none of it

KINDS = {"all-gather": "all_gather", "reduce-scatter": "reduce_scatter", "all-reduce": "all_reduce", "all-to-all": "all_to_all"}
ELEMENT_BYTES = {"F32": 4, "BF16": 2, "F16": 2}


def section_of(text, key):
    keys = [(m.start(), m.group(1)) for m in re.finditer(r'\n\s*key: "([^"]+)"\n\s*value \{', text)]
    for i, (start, k) in enumerate(keys):
        if k == key:
            return text[start: keys[i + 1][0] if i + 1 < len(keys) else len(text)]
    sys.exit(f"import_xla_collective_table: no key \"{key}\" in the table (keys: {', '.join(k for _, k in keys)})")


def entries_of(section):
    for block in re.split(r"\n\s*entries \{\s*\n\s*instruction \{", section)[1:]:
        opcode = re.search(r'opcode: "([^"]+)"', block).group(1)
        shape = re.search(r"shape \{(.*?)layout", block, re.S).group(1)
        element = re.search(r"element_type: (\w+)", shape).group(1)
        elements = 1
        for d in re.findall(r"dimensions: (\d+)", shape):
            elements *= int(d)
        groups = re.search(r"num_replica_groups: (\d+)\s+num_devices_per_group: (\d+)", block)
        throughput = int(re.search(r"network_throughput_bytes_per_sec: (\d+)", block).group(1))
        yield opcode, element, elements, groups, throughput


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--key", required=True)
    ap.add_argument("--hardware", required=True)
    ap.add_argument("--source", required=True, help="where the table comes from (repository, commit, date)")
    ap.add_argument("--min-bytes", type=int, default=256 << 20)
    ap.add_argument("--group-sizes", default="2,4,8", help="comma-separated group sizes to keep")
    ap.add_argument("--note", default="", help="a sentence put before the file's description")
    ap.add_argument("--nvls", choices=["on", "off"], default="on",
                    help="off: the table's runs had NVLink SHARP off (NCCL_NVLS_ENABLE=0); every row says so")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    sizes = {int(x) for x in a.group_sizes.split(",")}
    rows = []
    for opcode, element, elements, groups, throughput in entries_of(section_of(open(a.table).read(), a.key)):
        if opcode not in KINDS or groups is None or element not in ELEMENT_BYTES or throughput <= 0:
            continue
        count, size = int(groups.group(1)), int(groups.group(2))
        if size < 2 or size not in sizes:
            continue
        # The instruction's shape is its result: a reduce-scatter's is 1/size of its input.
        tensor_bytes = elements * ELEMENT_BYTES[element] * (size if opcode == "reduce-scatter" else 1)
        if tensor_bytes < a.min_bytes:
            continue
        row = {"kind": KINDS[opcode], "gpus": size}
        if count > 1:
            row["groups"] = count
        row["bytes"] = tensor_bytes
        row["time_us"] = round(tensor_bytes / throughput * 1e6, 1)
        row["source"] = f"{a.source}, key {a.key}, {opcode} {element}, {count} group(s) of {size}"
        if a.nvls == "off":
            row["nccl_nvls"] = False
        rows.append(row)
    if not rows:
        sys.exit("import_xla_collective_table: no rows at that size")
    rows.sort(key=lambda r: (r["kind"], r["gpus"], r["bytes"]))
    doc = {"format": "tpsim-measurements", "hardware": a.hardware,
           "description": f"{a.note}{len(rows)} NCCL collectives measured by XLA's team on one node of 8 GPUs (key {a.key}: "
                          f"all-gathers, reduce-scatters, all-reduces and all-to-alls of fp32 over groups of "
                          f"{' and '.join(str(x) for x in sorted(sizes))}, of {a.min_bytes >> 20} MiB and more), written by tools/import_xla_collective_table.py. Each time "
                          "is an XLA executable's median runtime, so it carries the runtime's launch (the 20-80 us "
                          "floor of the table's small sizes, left out here): under 10% of the smallest rows kept (at "
                          "64 MiB it is still a quarter of the time)."
                          + ("" if a.note else " Op-level: fit to them, cross-validate on them."),
           "measurements": rows}
    write_atomic(a.output, json.dumps(doc, indent=1) + "\n")
    print(f"{a.output}: {len(rows)} rows")


if __name__ == "__main__":
    main()
