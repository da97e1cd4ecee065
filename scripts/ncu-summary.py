#!/usr/bin/env python3
"""Summaries of the Nsight Compute CSVs that scripts/gpu-carried.sh brings back.

  scripts/ncu-summary.py instructions CSV SAMPLES
      the `instructions` step's CSV (one `run --pipeline device` of SAMPLES samples): each kernel's warp
      instructions issued a sample, summed over its launches, and the instruction floor they set at
      the full issue rate of 132 SMs x 4 schedulers x 1.98 GHz (H100 SXM and H200 alike)
  scripts/ncu-summary.py sass CSV [BLOCKS]
      the `profile` step's SASS page (its first kernel): the stall reasons, the opcodes' shares of the
      instructions executed and of the stall samples, and the BLOCKS (default 12) hottest runs of
      instructions with one execution count (the basic blocks, hottest first)
"""
import collections
import csv
import re
import sys

ISSUE = 132 * 4 * 1.98e9  # warp instructions a second, every slot busy


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def kernel_name(full):
    name = full.replace("void ", "").replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    return re.sub(r"[<(].*", "", name).split("::")[-1]


def instructions(path, samples):
    rows = csv.DictReader(line for line in open(path) if line.startswith('"'))
    inst, dur, launches = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        k, v = kernel_name(r["Kernel Name"]), number(r["Metric Value"])
        if r["Metric Name"] == "smsp__inst_issued.sum":
            inst[k] += v
            launches[k] += 1
        elif r["Metric Name"] == "gpu__time_duration.sum":
            dur[k] += v
    print(f"{'kernel':24s} {'launches':>8s} {'warp instr/sample':>18s} {'floor ns':>9s} {'ncu ns':>8s}")
    for k, v in inst.most_common():
        print(f"{k:24s} {launches[k]:8d} {v / samples:18.0f} {v / samples / ISSUE * 1e9:9.2f} {dur[k] / samples:8.2f}")
    total = sum(inst.values()) / samples
    print(f"{'total':24s} {'':8s} {total:18.0f} {total / ISSUE * 1e9:9.2f} {sum(dur.values()) / samples:8.2f}")
    print("(ncu ns: under Nsight Compute's locked clocks, not bench's)")


def sass(path, blocks):
    header, data, kernels = None, [], 0
    for r in csv.reader(open(path)):
        if r and r[0] == "Address":
            header, kernels = r, kernels + 1
        elif header and kernels == 1 and len(r) == len(header):
            data.append(dict(zip(header, r)))
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    reasons = collections.Counter()
    for d in data:
        for s in stalls:
            reasons[s] += number(d[s])
    total = sum(reasons.values())
    print("stall reasons (share of the samples):")
    for s, v in reasons.most_common(8):
        print(f"  {s:26s} {v / total * 100:5.1f}%")
    executed = sum(number(d["Instructions Executed"]) for d in data)
    sampled = sum(number(d["Warp Stall Sampling (All Samples)"]) for d in data)
    ops, op_samples = collections.Counter(), collections.Counter()
    for d in data:
        words = d["Source"].split()
        op = (words[1] if words and words[0].startswith("@") else words[0] if words else "").split(".")[0]
        ops[op] += number(d["Instructions Executed"])
        op_samples[op] += number(d["Warp Stall Sampling (All Samples)"])
    print("opcodes (share of the instructions executed, of the stall samples):")
    for op, v in ops.most_common(16):
        print(f"  {op:10s} {v / executed * 100:5.1f}% {op_samples[op] / sampled * 100:5.1f}%")
    runs = []
    for i, d in enumerate(data):
        e = number(d["Instructions Executed"])
        if runs and runs[-1]["e"] == e:
            runs[-1]["ops"].append(d["Source"])
            runs[-1]["s"] += number(d["Warp Stall Sampling (All Samples)"])
        else:
            runs.append({"at": i, "e": e, "ops": [d["Source"]], "s": number(d["Warp Stall Sampling (All Samples)"])})
    print("hottest blocks (instruction index, length, share of the instructions, of the stall samples):")
    for b in sorted(runs, key=lambda b: -b["e"] * len(b["ops"]))[:blocks]:
        share = b["e"] * len(b["ops"]) / executed * 100
        ops_text = " | ".join(o.split(",")[0].split()[0 if not o.startswith("@") else 1] for o in b["ops"][:24] if o)
        print(f"  @{b['at']} x{len(b['ops'])}: {share:4.1f}% {b['s'] / sampled * 100:4.1f}%  {ops_text}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "instructions":
        instructions(sys.argv[2], float(sys.argv[3]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "sass":
        sass(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 12)
    else:
        sys.exit(__doc__)
