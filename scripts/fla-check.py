#!/usr/bin/env python3
"""chunkinv's `fla_solve_tril` against fla's own `solve_tril`, bit for bit.

On a machine with a CUDA GPU, PyTorch, Triton and fla's source (a folder holding
the `fla` package, passed with --fla; it is not part of this project):

    scripts/fla-check.py --binary build/chunkinv --fla .ext/fla --out /tmp/fla-check

For each family and chunk size, chunkinv exports N samples with what a path made
of them (`inspect --export-path`: the path's L and fla_solve_tril's inverse of
it), fla's solve_tril inverts the same FP32 L (laid out as fla takes it,
[1, N*C, 1, C]), and every element of the two inverses is compared by its bits.
Differences are counted by kind: in value, in the sign of a zero only, and in a
NaN's payload only. Prints one line per (path, family, C) and a JSON summary;
exits 1 when any element differs in value or in the sign of a zero.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys

import numpy as np


def fla_solve_tril(fla_dir):
    sys.path.insert(0, fla_dir)
    return importlib.import_module("fla.ops.utils.solve_tril").solve_tril


def compare(ours, theirs):
    a = ours.astype(np.float32).view(np.uint32)
    b = theirs.astype(np.float32).view(np.uint32)
    differ = a != b
    nan_a, nan_b = np.isnan(ours), np.isnan(theirs)
    payload = differ & nan_a & nan_b
    zero_sign = differ & (ours == 0) & (theirs == 0)
    value = differ & ~payload & ~zero_sign
    chunk_value = value.reshape(value.shape[0], -1).any(axis=1)
    return {"elements": int(a.size), "value": int(value.sum()), "zero_sign": int(zero_sign.sum()),
            "nan_payload": int(payload.sum()), "chunks": int(value.shape[0]),
            "chunks_differing": int(chunk_value.sum()),
            "max_rel": float(np.max(np.abs(ours[value] - theirs[value]) / np.maximum(np.abs(theirs[value]), 1e-30)))
            if value.any() else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--fla", required=True, help="folder that holds the fla package")
    ap.add_argument("--out", required=True, help="folder for the exported samples")
    ap.add_argument("--count", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--families", default="model_like,weak_decay_correlated,real_gates,floor")
    ap.add_argument("--chunks", default="16,32,64")
    ap.add_argument("--paths", default="emulated,kernel")
    a = ap.parse_args()
    import torch
    solve = fla_solve_tril(a.fla)
    os.makedirs(a.out, exist_ok=True)
    summary, bad = [], False
    for path in a.paths.split(","):
        for fam in a.families.split(","):
            for c in map(int, a.chunks.split(",")):
                f = os.path.join(a.out, f"{path}-{fam}-c{c}.npz")
                subprocess.run([a.binary, "inspect", "--family", fam, "-a", f"chunk={c}", "-a", "method=fla_solve_tril",
                                "--seed", str(a.seed), "--count", str(a.count), "--export", f, "--export-path", path],
                               check=True, stdout=subprocess.DEVNULL)
                z = np.load(f)
                L, inv = z["L"], z["INV"]
                n = L.shape[0]
                A = torch.from_numpy(np.ascontiguousarray(L.astype(np.float32))).cuda().reshape(1, n * c, 1, c)
                out = solve(A).reshape(n, c, c).cpu().numpy()
                r = compare(inv, out)
                r.update(path=path, family=fam, chunk=c)
                summary.append(r)
                bad |= r["value"] > 0 or r["zero_sign"] > 0
                print(f"{path:9s} {fam:22s} C={c:2d}: {r['value']} of {r['elements']} elements differ in value "
                      f"({r['chunks_differing']} of {r['chunks']} chunks, max rel {r['max_rel']:.2e}), "
                      f"{r['zero_sign']} in the sign of a zero, {r['nan_payload']} in a NaN's payload", flush=True)
    print(json.dumps(summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
