"""chunkinv.testing.assert_inverse_close: passes on the gold and on the
production arithmetic, fails on a perturbed inverse with a message naming
the worst chunk, element and figure; its relative RMSE is the library's
inv_total_rel_rmse; fla's [B, T, H, C] layout is read chunk by chunk."""
import re

import numpy as np
import pytest

import chunkinv
from chunkinv.testing import assert_inverse_close


def batch(seed=0, n=6, c=32, d=64, floor=-1.0):
    rng = np.random.default_rng(seed)
    keys = rng.standard_normal((n, c, d))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    g = floor / (1 + np.exp(-rng.standard_normal((n, c))))
    return keys, g, 1 / (1 + np.exp(-rng.standard_normal((n, c))))


def test_the_gold_and_the_production_arithmetic_pass():
    keys, g, beta = batch()
    assert_inverse_close(chunkinv.gold(keys, g, beta)["INV"], keys, g, beta, rel_rmse=0.0, atol=0.0)
    emu = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")
    assert_inverse_close(emu["INV"], keys, g, beta)  # the default tolerance, relative RMSE 5e-3


def test_the_figure_is_the_librarys_inv_total_rel_rmse():
    keys, g, beta = batch(1)
    emu = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")
    m = emu["metrics"]["inv_total_rel_rmse"]
    worst = int(np.argmax(m))
    # Just under the worst chunk's figure: that chunk alone fails, and the message prints its figure.
    with pytest.raises(AssertionError) as e:
        assert_inverse_close(emu["INV"], keys, g, beta, rel_rmse=float(m[worst]) * (1 - 1e-9))
    text = str(e.value)
    assert "1 of 6 chunks fail" in text
    assert f"Worst: chunk {worst}: relative RMSE {m[worst]:.3e}" in text
    assert_inverse_close(emu["INV"], keys, g, beta, rel_rmse=float(m[worst]) * (1 + 1e-9))


def test_a_perturbed_element_is_named_with_its_chunk_and_figures():
    keys, g, beta = batch(2)
    inv = chunkinv.gold(keys, g, beta)["INV"].copy()
    inv[4, 20, 3] += 0.25
    inv[1, 7, 2] += 0.01
    with pytest.raises(AssertionError) as e:
        assert_inverse_close(inv, keys, g, beta, rel_rmse=1e-3, msg="my kernel, C = 32")
    text = str(e.value)
    assert text.splitlines()[0] == "my kernel, C = 32"
    assert "2 of 6 chunks fail" in text
    assert re.search(r"Worst: chunk 4: relative RMSE \d\.\d{3}e-\d\d > 1\.0e-03\.", text), text
    assert "Its worst element: INV[20, 3] = " in text and "absolute error 2.500e-01" in text
    assert "Other failing chunks, worst first: 1." in text


def test_elementwise_tolerance_as_torch_testing():
    keys, g, beta = batch(3)
    gold = chunkinv.gold(keys, g, beta)["INV"]
    inv = gold.copy()
    inv[0, 5, 1] += 1e-3
    assert_inverse_close(inv, keys, g, beta, rel_rmse=None, atol=1e-3 * (1 + 1e-9))
    with pytest.raises(AssertionError, match=r"chunk 0: 1 of 1024 elements beyond atol \+ rtol \* \|gold\|"):
        assert_inverse_close(inv, keys, g, beta, rel_rmse=None, atol=5e-4)
    with pytest.raises(ValueError, match="give rel_rmse, atol or rtol"):
        assert_inverse_close(inv, keys, g, beta, rel_rmse=None)


def test_non_finite_candidates_fail_and_gold_overflow_must_be_matched():
    keys, g, beta = batch(4)
    inv = chunkinv.gold(keys, g, beta)["INV"].copy()
    inv[3, 9, 9] = np.nan
    with pytest.raises(AssertionError, match=r"(?s)Worst: chunk 3: relative RMSE inf > .*INV\[9, 9\] = nan"):
        assert_inverse_close(inv, keys, g, beta)
    # g = -5 on all 32 tokens: the emulated path's decays overflow and its inverse is not finite, the gold's is.
    gk = np.full_like(g, -5.0)
    emu = chunkinv.inverse(keys, gk, beta, path="emulated", method="neumann")["INV"]
    assert not np.all(np.isfinite(emu))
    with pytest.raises(AssertionError, match="relative RMSE inf"):
        assert_inverse_close(emu, keys, gk, beta)


def test_flas_token_layout_with_cu_seqlens():
    rng = np.random.default_rng(5)
    t, h, k, c = 40, 2, 16, 16
    keys = rng.standard_normal((1, t, h, k))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    g = -rng.uniform(0.01, 1.0, (1, t, h))
    beta = rng.uniform(0.1, 0.9, (1, t, h))
    cu = np.array([0, 13, 40])
    s = chunkinv.chunked(keys, g, beta, cu_seqlens=cu, chunk=c)
    gold = chunkinv.gold(keys, g, beta, cu_seqlens=cu, chunk=c)["INV"]
    # fla's A [B, T, H, C]: row t of its chunk's inverse at token t.
    A = np.zeros((1, t, h, c))
    for i, (row, first, head, valid) in enumerate(s["chunks"].astype(int)):
        A[row, first:first + valid, head, :valid] = gold[i, :valid, :valid]
    assert_inverse_close(A, keys, g, beta, cu_seqlens=cu, chunk=c, rel_rmse=0.0)
    A[0, 30, 1, 0] += 0.5  # sequence 2's second chunk (tokens 29..39), head 1, its row 1
    with pytest.raises(AssertionError) as e:
        assert_inverse_close(A, keys, g, beta, cu_seqlens=cu, chunk=c)
    assert "Worst: chunk 5 (batch row 0, tokens 29..39, head 1, 11 of 16 tokens)" in str(e.value)
    assert "INV[1, 0]" in str(e.value)
    with pytest.raises(ValueError, match=r"the candidate's shape \(1, 40, 2, 8\) is not"):
        assert_inverse_close(A[..., :8], keys, g, beta, cu_seqlens=cu, chunk=c)
