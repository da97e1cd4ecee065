#!/usr/bin/env python3
"""Score fla's chunk_kda and chunk_gated_delta_rule against chunkinv's FP64 recurrence.

On a GPU machine with fla (flash-linear-attention) and torch importable: draws
sequences in fla's layout for three gate regimes, runs fla's two chunked
kernels in BF16, writes the inputs and each kernel's o and final state as
.npz files, and scores them with `chunkinv seq --inputs ... --candidate ...`
(docs/downstream.md). Beside each scored kernel it runs chunkinv's model of
the same kernel (`seq --inputs` with the fla storage preset and fla's
inverse, method fla_solve_tril) on the same sequences.

With --backward it also runs each kernel's backward from a BF16 upstream do
(written with the inputs), scores its dq, dk, dv, dg, dbeta against the FP64
recurrence's gradient and models it with `-a backward=stored`. A backward fla
refuses (its gated backward on Triton older than 3.7.1 on Hopper) is reported
as skipped, with fla's reason, and the forward is still scored.

Without torch, fla or a GPU it says what is missing and exits 0 (a skip).

  python/examples/score_fla.py --chunkinv build/chunkinv --tokens 1024,8192,65536 --out results/fla
"""
import argparse
import os
import subprocess
import sys

REGIMES = {
    # g = -5 sigmoid(N(0,1)): chunkinv's model_like
    "model_like": lambda torch, shape: -5.0 * torch.sigmoid(torch.randn(shape)),
    # weak decay everywhere: the state remembers thousands of tokens
    "weak_decay": lambda torch, shape: -0.01 * torch.sigmoid(torch.randn(shape)),
    # chunkinv's sparse_forget: weak decay, one token in 200 forgets (g = -10)
    "sparse_forget": lambda torch, shape: torch.where(
        torch.rand(shape) < 0.005, torch.full(shape, -10.0), -0.1 * torch.sigmoid(torch.randn(shape))),
}


def missing():
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not importable"
    import torch
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    try:
        import fla.ops.kda  # noqa: F401
        import fla.ops.gated_delta_rule  # noqa: F401
    except ImportError as e:
        return f"fla is not importable ({e})"
    return None


def unit_bf16(torch, shape):
    x = torch.randn(shape, dtype=torch.float64)
    return (x / x.norm(dim=-1, keepdim=True)).to(torch.bfloat16)


def save(path, **tensors):
    import numpy as np
    # float32 holds every BF16 value exactly; chunkinv reads f32 .npz members.
    np.savez(path, **{k: v.detach().float().cpu().numpy() for k, v in tensors.items()})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunkinv", default="build/chunkinv")
    ap.add_argument("--tokens", default="1024,8192,65536", help="sequence lengths T")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128, help="K = V")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fla-scores")
    ap.add_argument("--fla", default=None, help="a folder holding the fla package, searched first (else wherever it is installed)")
    ap.add_argument("--backward", action="store_true", help="also score the kernels' gradients")
    a = ap.parse_args()
    if a.fla:
        sys.path.insert(0, os.path.abspath(a.fla))
    why = missing()
    if why:
        print(f"score_fla: skipped: {why}", file=sys.stderr)
        return 0
    import torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.kda import chunk_kda
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    B, H, K = a.batch, a.heads, a.dim
    for T in (int(t) for t in a.tokens.split(",")):
        for regime, gates in REGIMES.items():
            q, k = unit_bf16(torch, (B, T, H, K)), unit_bf16(torch, (B, T, H, K))
            v = torch.randn(B, T, H, K).to(torch.bfloat16)
            beta = torch.sigmoid(torch.randn(B, T, H)).to(torch.bfloat16)
            for kernel, g in (("chunk_kda", gates(torch, (B, T, H, K))), ("chunk_gated_delta_rule", gates(torch, (B, T, H)))):
                g = g.to(torch.bfloat16).float()
                stem = os.path.join(a.out, f"{kernel}-{regime}-T{T}")
                d_o = torch.randn(B, T, H, K).to(torch.bfloat16)
                inputs = dict(q=q, k=k, v=v, g=g, beta=beta.float())
                if a.backward:
                    inputs["do"] = d_o
                save(stem + "-inputs.npz", **inputs)
                dev = [x.cuda().requires_grad_(a.backward) for x in (q, k, v, g, beta)]
                fn = chunk_kda if kernel == "chunk_kda" else chunk_gated_delta_rule
                o, ht = fn(*dev, output_final_state=True)
                outputs = dict(o=o, ht=ht)
                backward = False
                if a.backward:
                    try:
                        o.backward(d_o.cuda())  # ht is not in the loss: dht = 0, as chunkinv's default
                        for name, x in zip(("dq", "dk", "dv", "dg", "dbeta"), dev):
                            outputs[name] = x.grad
                        backward = True
                    except Exception as e:  # fla refuses its gated backward on old Triton on Hopper
                        print(f"{stem}: backward skipped: {type(e).__name__}: {e}", file=sys.stderr)
                torch.cuda.synchronize()
                save(stem + "-out.npz", **outputs)
                storage = "fla_chunk_kda" if kernel == "chunk_kda" else "fla_chunk_gdn"
                common = [a.chunkinv, "seq", "--inputs", stem + "-inputs.npz", "-a", "chunk=64", "-a",
                          "method=fla_solve_tril", "-a", f"storage={storage}", "-q"]
                subprocess.run(common + ["--candidate", stem + "-out.npz", "-o", stem + "-scored.json"], check=True)
                modelled = ["-a", "backward=stored"] if backward else []
                subprocess.run(common + modelled + ["--paths", "gold,emulated", "-o", stem + "-modelled.json"], check=True)
                print(f"{stem}: scored {stem}-scored.json, modelled {stem}-modelled.json")
    print(f"tables: {a.chunkinv} table {a.out}/*-scored.json {a.out}/*-modelled.json --preset full"
          + (" (and --preset backward)" if a.backward else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
