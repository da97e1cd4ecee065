"""A kernel test written with chunkinv: the kind a kernel author keeps beside
a Triton/CUDA kernel. Here the "kernels" are NumPy stand-ins (an FP16 Neumann
product, as FlashKDA v1 computes the inverse, on an FP16 L; a layer computed
in FP32); replace `my_kernel` and `my_layer` by yours (torch tensors go in as they are, on the CPU or a CUDA
GPU, BF16 included).

    /usr/bin/python3 -m pytest examples/   # after `pip install --no-build-isolation .`
    PYTHONPATH=build/python /usr/bin/python3 -m pytest examples/   # or on the build's module
"""
import numpy as np
import pytest

import chunkinv
from chunkinv.testing import assert_inverse_close, assert_output_close


def my_kernel(keys, g, beta):
    """L and INV of every chunk, the kernel's own way: FP32 decays, FP16 L, FP16 Neumann product."""
    G = np.cumsum(g.astype(np.float32), axis=-1)
    kk = np.einsum("nid,njd->nij", keys.astype(np.float32), keys.astype(np.float32))
    decay = np.exp(np.minimum(G[:, :, None] - G[:, None, :], 0)).astype(np.float32)
    L = np.tril(beta[:, :, None].astype(np.float32) * kk * decay, -1).astype(np.float16)
    c = L.shape[-1]
    inv = (np.eye(c, dtype=np.float16) - L).astype(np.float16)
    p, power = L, 1
    while 2 * power < c:
        p = (p.astype(np.float32) @ p.astype(np.float32)).astype(np.float16)
        inv = (inv + (inv.astype(np.float32) @ p.astype(np.float32)).astype(np.float16)).astype(np.float16)
        power *= 2
    return L, inv


def inputs(n, c, d, floor, seed=0):
    rng = np.random.default_rng(seed)
    keys = rng.standard_normal((n, c, d))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    g = floor / (1 + np.exp(-rng.standard_normal((n, c))))  # the K3 safe gate: floor * sigmoid(N(0, 1))
    beta = 1 / (1 + np.exp(-rng.standard_normal((n, c))))
    return keys, g, beta


@pytest.mark.parametrize("chunk", [16, 32])
def test_my_inverse_is_within_budget(chunk):
    keys, g, beta = inputs(200, chunk, 64, floor=-1.0)
    L, inv = my_kernel(keys, g, beta)
    m = chunkinv.score(inv, keys, g, beta, L=L, method="neumann")["metrics"]
    s = chunkinv.aggregate(m["inv_total_rel_rmse"])
    assert np.all(m["inv_finite"] == 1)
    # Measured (seed 0, d = 64): median 1.2e-4, p99 1.9e-4 at C = 16 and 1.7e-4 at C = 32.
    assert s["median"] < 5e-4 and s["p99"] < 1e-3, s
    # And no worse than the production kernel's arithmetic (the emulated path: median 1.6e-4 and 1.8e-4 here).
    ref = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")["metrics"]["inv_total_rel_rmse"]
    assert s["median"] < 1.5 * np.median(ref)


def test_strong_gates_overflow_the_kernel_but_not_mine():
    # g = -5 on every token of a 32-token chunk: the kernel's reciprocal decays 2^(-G2)
    # overflow (SPEC's floor boundary, C >= 19), so its inverse is never finite; a kernel
    # that forms each decay per pair, exp(min(G_i - G_j, 0)), stays finite.
    keys, g, beta = inputs(20, 32, 64, floor=-5.0, seed=1)
    g = np.full_like(g, -5.0)
    emu = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")["metrics"]
    assert chunkinv.aggregate(emu["inv_finite"], flag=True)["mean"] == 0.0
    L, inv = my_kernel(keys, g, beta)
    mine = chunkinv.score(inv, keys, g, beta, L=L, method="neumann")["metrics"]
    assert np.all(mine["inv_finite"] == 1)


@pytest.mark.parametrize("chunk", [16, 32])
def test_my_inverse_is_close_to_the_gold(chunk):
    # As fla's tests use assert_close: a relative RMSE per chunk (here the library's inv_total_rel_rmse);
    # a failure names the worst chunk, its worst element and the figures.
    keys, g, beta = inputs(50, chunk, 64, floor=-1.0, seed=2)
    _, inv = my_kernel(keys, g, beta)
    assert_inverse_close(inv, keys, g, beta, rel_rmse=1e-3)


def test_on_torch_tensors_where_torch_is():
    # A kernel repo's tensors as they are: torch, on the GPU where there is one. Results come back as NumPy.
    torch = pytest.importorskip("torch")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    keys, g, beta = inputs(8, 32, 64, floor=-1.0, seed=3)
    tk = torch.tensor(keys, dtype=torch.bfloat16, device=device)
    tg = torch.tensor(g, dtype=torch.float32, device=device)
    tb = torch.tensor(beta, dtype=torch.float32, device=device)
    _, inv = my_kernel(tk.float().cpu().numpy(), tg.cpu().numpy(), tb.cpu().numpy())
    assert_inverse_close(torch.tensor(inv, device=device), tk, tg, tb, rel_rmse=1e-3)


def my_layer(q, k, v, g, beta):
    """The layer's o [B, T, H, V] and final state [B, H, K, V], token by token in FP32 (per-channel gates, KDA)."""
    B, T, H, K = q.shape
    o = np.zeros(v.shape, dtype=np.float32)
    ht = np.zeros((B, H, K, v.shape[-1]), dtype=np.float32)
    for b in range(B):
        for h in range(H):
            S = np.zeros((K, v.shape[-1]), dtype=np.float32)
            for t in range(T):
                S *= np.exp(g[b, t, h]).astype(np.float32)[:, None]
                kt = k[b, t, h].astype(np.float32)
                S += np.float32(beta[b, t, h]) * np.outer(kt, v[b, t, h].astype(np.float32) - S.T @ kt)
                o[b, t, h] = np.float32(K ** -0.5) * (S.T @ q[b, t, h].astype(np.float32))
            ht[b, h] = S
    return o, ht


def test_my_layer_output_is_close_to_the_fp64_recurrence():
    # fla's layout: q, k [B, T, H, K], v [B, T, H, V], g [B, T, H, K] (or [B, T, H]), beta [B, T, H]. The
    # reference is chunkinv's FP64 recurrence (k read in BF16, as kernels read it); a failure names the
    # sequence, head, worst element and the 64-token block where the error is largest.
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 128, 2, 32)) for _ in range(3))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    k = (k.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)  # BF16 keys, as a kernel takes them
    g = -0.3 / (1 + np.exp(-rng.standard_normal((2, 128, 2, 32))))
    beta = 1 / (1 + np.exp(-rng.standard_normal((2, 128, 2))))
    o, ht = my_layer(q, k, v, g, beta)
    assert_output_close(o, q, k, v, g, beta, final_state=ht, rel_rmse=1e-5)
