"""chunkinv.recurrence, recurrence_backward and chunkinv.testing's output and
gradient checks: the FP64 recurrence equals a plain NumPy loop over the
tokens (per-token and per-channel gates, an initial state, packed
sequences), its gradients that loop's central differences; the checks pass
on them, and fail on a perturbed output, final state or gradient with a
message naming the tensor, sequence, head, element and token block; bad
shapes are one line."""
import re

import numpy as np
import pytest

import chunkinv
from chunkinv.testing import assert_output_close


def bf16(x):
    """Round to BF16 (nearest even), as the tool reads k."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def inputs(seed=0, B=2, T=40, H=2, K=16, V=8, channel=False, h0=False):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, T, H, K)) / np.sqrt(K)
    k = rng.standard_normal((B, T, H, K))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((B, T, H, V))
    g = -0.5 / (1 + np.exp(-rng.standard_normal((B, T, H, K) if channel else (B, T, H))))
    beta = 1 / (1 + np.exp(-rng.standard_normal((B, T, H))))
    state = rng.standard_normal((B, H, K, V)) * 0.1 if h0 else None
    return q, k, v, g, beta, state


def naive(q, k, v, g, beta, state=None, cu=None, scale=None):
    """The token recurrence written out plainly: S = diag(exp(g)) S; S += beta k (v - S^T k)^T; o = scale S^T q."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    kb = bf16(k)
    scale = K ** -0.5 if scale is None else scale
    spans = [(b, 0, T) for b in range(B)] if cu is None else [(0, cu[i], cu[i + 1] - cu[i]) for i in range(len(cu) - 1)]
    o = np.zeros((B, T, H, V))
    ht = np.zeros((len(spans), H, K, V))
    for n, (row, first, count) in enumerate(spans):
        for h in range(H):
            S = np.zeros((K, V)) if state is None else state[n, h].copy()
            for t in range(first, first + count):
                gate = g[row, t, h]
                S = np.exp(gate)[:, None] * S if np.ndim(gate) else np.exp(gate) * S
                S = S + beta[row, t, h] * np.outer(kb[row, t, h], v[row, t, h] - S.T @ kb[row, t, h])
                o[row, t, h] = scale * (S.T @ q[row, t, h])
            ht[n, h] = S
    return o, ht


@pytest.mark.parametrize("channel", [False, True])
def test_the_recurrence_is_the_plain_loop(channel):
    q, k, v, g, beta, h0 = inputs(1, channel=channel, h0=True)
    got = chunkinv.recurrence(q, k, v, g, beta, initial_state=h0)
    o, ht = naive(q, k, v, g, beta, h0)
    assert got["o"].shape == o.shape and got["final_state"].shape == ht.shape
    np.testing.assert_allclose(got["o"], o, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got["final_state"], ht, rtol=0, atol=1e-13)


def test_packed_sequences_and_a_given_scale():
    q, k, v, g, beta, _ = inputs(2, B=1, T=50)
    cu = np.array([0, 7, 30, 50])
    got = chunkinv.recurrence(q, k, v, g, beta, cu_seqlens=cu, scale=0.5)
    o, ht = naive(q, k, v, g, beta, cu=cu, scale=0.5)
    np.testing.assert_allclose(got["o"], o, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got["final_state"], ht, rtol=0, atol=1e-13)
    assert_output_close(o, q, k, v, g, beta, final_state=ht, cu_seqlens=cu, scale=0.5, rel_rmse=1e-12)


def test_the_reference_passes_and_small_noise_passes_the_default():
    q, k, v, g, beta, _ = inputs(3)
    ref = chunkinv.recurrence(q, k, v, g, beta)
    assert_output_close(ref["o"], q, k, v, g, beta, final_state=ref["final_state"], rel_rmse=0.0, atol=0.0)
    noisy = ref["o"] * (1 + 1e-3 * np.random.default_rng(0).standard_normal(ref["o"].shape))
    assert_output_close(noisy, q, k, v, g, beta)  # the default, relative RMSE 5e-3 per sequence head


def test_a_perturbed_token_is_named_with_its_sequence_head_and_block():
    q, k, v, g, beta, _ = inputs(4, T=200)
    o = chunkinv.recurrence(q, k, v, g, beta)["o"].copy()
    o[1, 150, 0, 3] += 1.0
    with pytest.raises(AssertionError) as e:
        assert_output_close(o, q, k, v, g, beta, block=64)
    text = str(e.value)
    assert "1 of 4 sequence heads fail" in text
    assert "Worst: sequence 1 (batch row 1, tokens 0..199), head 0: o relative RMSE" in text
    assert re.search(r"Its worst element: o\[1, 150, 0, 3\] = \S+ vs \S+ \(absolute error 1\.000e\+00\)", text)
    assert "Its worst 64-token block: tokens 128..191" in text


def test_non_finite_tokens_and_a_wrong_final_state_fail():
    q, k, v, g, beta, _ = inputs(5)
    ref = chunkinv.recurrence(q, k, v, g, beta)
    o = ref["o"].copy()
    o[0, 33, 1, :] = np.nan
    with pytest.raises(AssertionError, match=r"(?s)sequence 0 .*head 1: o 8 non-finite elements.*first non-finite token: 33"):
        assert_output_close(o, q, k, v, g, beta)
    ht = ref["final_state"].copy()
    ht[1, 0] *= 1.1
    with pytest.raises(AssertionError, match=r"Worst: sequence 1 .*head 0: final_state relative RMSE 1\.000e-01"):
        assert_output_close(ref["o"], q, k, v, g, beta, final_state=ht)


def test_elementwise_tolerance_as_torch_testing():
    q, k, v, g, beta, _ = inputs(6)
    ref = chunkinv.recurrence(q, k, v, g, beta)["o"]
    o = ref + 2e-6
    assert_output_close(o, q, k, v, g, beta, rel_rmse=None, atol=3e-6)
    with pytest.raises(AssertionError, match=r"4 of 4 sequence heads fail"):
        assert_output_close(o, q, k, v, g, beta, rel_rmse=None, atol=1e-6)


def test_bad_shapes_and_tolerances_are_one_line():
    q, k, v, g, beta, _ = inputs(7)
    ref = chunkinv.recurrence(q, k, v, g, beta)
    with pytest.raises(ValueError, match=r"^assert_output_close: o has shape \(2, 40, 2\), not \[B, T, H, V\]"):
        assert_output_close(ref["o"][..., 0], q, k, v, g, beta)
    with pytest.raises(ValueError, match=r"^assert_output_close: final_state has shape"):
        assert_output_close(ref["o"], q, k, v, g, beta, final_state=ref["final_state"][0])
    with pytest.raises(ValueError, match=r"give rel_rmse, atol or rtol"):
        assert_output_close(ref["o"], q, k, v, g, beta, rel_rmse=None)
    with pytest.raises(ValueError, match=r"^inputs arrays\[q\]: shape \(2, 40, 2, 8\) is not \(2, 40, 2, 16\)"):
        chunkinv.recurrence(q[..., :8], k, v, g, beta)
    with pytest.raises(ValueError, match=r"^scale = -1 is not a positive finite number"):
        chunkinv.recurrence(q, k, v, g, beta, scale=-1.0)


@pytest.mark.parametrize("channel", [False, True])
def test_the_backward_is_the_plain_loops_finite_differences(channel):
    # L = sum(do * o) + sum(dht * ht) of the plain loop, central differences in every input element (k in BF16,
    # as the tool reads it: its perturbations are taken on BF16-exact keys, so that the rounding is the identity).
    q, k, v, g, beta, h0 = inputs(8, B=1, T=6, H=1, K=4, V=3, channel=channel, h0=True)
    k = bf16(k)
    rng = np.random.default_rng(1)
    do, dht = rng.standard_normal((1, 6, 1, 3)), rng.standard_normal((1, 1, 4, 3))
    got = chunkinv.recurrence_backward(q, k, v, g, beta, do, dht=dht, initial_state=h0)

    def loss(q_, v_, g_, beta_, h0_):
        o, ht = naive(q_, k, v_, g_, beta_, h0_)
        return float(np.sum(do * o) + np.sum(dht * ht))

    args = {"dq": q, "dv": v, "dg": g, "dbeta": beta, "dh0": h0}
    for name, x in args.items():
        fd = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            step = 1e-6 * max(1.0, abs(x[i]))
            plus, minus = [{n: a.copy() for n, a in args.items()} for _ in range(2)]
            plus[name][i] += step
            minus[name][i] -= step
            fd[i] = (loss(*(plus[n] for n in args)) - loss(*(minus[n] for n in args))) / (2 * step)
        np.testing.assert_allclose(got[name], fd, rtol=1e-6, atol=1e-8, err_msg=name)
    assert got["dk"].shape == k.shape and np.all(np.isfinite(got["dk"]))


def test_assert_gradients_close_names_the_gradient_sequence_and_token():
    q, k, v, g, beta, _ = inputs(9, T=70, channel=True)
    do = np.random.default_rng(2).standard_normal(v.shape)
    ref = chunkinv.recurrence_backward(q, k, v, g, beta, do)
    grads = {name: ref[name].copy() for name in ("dq", "dk", "dv", "dg", "dbeta")}
    chunkinv.testing.assert_gradients_close(grads, q, k, v, g, beta, do, rel_rmse=0.0, atol=0.0)
    grads["dk"][0, 66, 1, 2] += 10.0
    with pytest.raises(AssertionError) as e:
        chunkinv.testing.assert_gradients_close(grads, q, k, v, g, beta, do, block=32)
    text = str(e.value)
    assert text.startswith("Gradients not close to the FP64 recurrence's: 1 of 4 sequence heads fail")
    assert "Worst: sequence 0 (batch row 0, tokens 0..69), head 1: dk relative RMSE" in text
    assert "Its worst element: dk[0, 66, 1, 2]" in text
    assert "Its worst 32-token block: tokens 64..69" in text
    with pytest.raises(ValueError, match=r"^assert_gradients_close: grads names \['dx'\]; it takes dq, dk"):
        chunkinv.testing.assert_gradients_close({"dx": grads["dq"]}, q, k, v, g, beta, do)
    with pytest.raises(ValueError, match=r"^assert_gradients_close: dbeta has shape \(2, 70\), not \[B, T, H\]"):
        chunkinv.testing.assert_gradients_close({"dbeta": ref["dbeta"][:, :, 0]}, q, k, v, g, beta, do)
    with pytest.raises(ValueError, match=r"^inputs arrays\[do\]: shape"):
        chunkinv.recurrence_backward(q, k, v, g, beta, do[..., :4])
