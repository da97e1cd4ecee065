"""pytest helpers for a kernel's inverse: the kernel's (I + L)^-1 against the FP64
gold inverse of the same inputs, with a failure message that says where the
error is (docs/python.md).

    from chunkinv.testing import assert_inverse_close
    assert_inverse_close(A, k, g, beta, cu_seqlens=cu, chunk=64)

The tolerance reads as fla's ``assert_close`` (a relative RMSE, here per chunk
and as SPEC §3 defines it: the metric ``inv_total_rel_rmse`` of ``chunkinv
score``) and, when ``atol`` or ``rtol`` is given, also as
``torch.testing.assert_close`` (every element within ``atol + rtol * |gold|``).
"""
import numpy as _np

from . import _array, _core, _inputs

__all__ = ["assert_inverse_close"]


def _numpy(x):
    """Any array as float64 NumPy on the host: torch tensors (CUDA, BF16) are moved and widened by torch."""
    if callable(getattr(x, "detach", None)):
        return x.detach().cpu().double().numpy()
    if not isinstance(x, _np.ndarray) and hasattr(x, "__dlpack__"):
        x = _np.from_dlpack(x)
    return _np.asarray(x, dtype=_np.float64)


def _rel_rmse(a, e):
    """SPEC §3: sqrt(mean((a - e)^2)) / (sqrt(mean(e^2)) + 1e-30), +inf where a has a non-finite entry."""
    if not _np.all(_np.isfinite(a)):
        return _np.inf
    return float(_np.sqrt(_np.mean((a - e) ** 2)) / (_np.sqrt(_np.mean(e**2)) + 1e-30))


def _blocks(A, n, c, chunks, token_layout):
    """The candidate's C x C block of every sample, and how many of its rows and columns are real tokens.

    A is [N, C, C] (one matrix per sample, as ``chunkinv.inverse`` returns), or, for inputs in fla's layout
    (keys [B, T, H, K]), fla's [B, T, H, C]: row t of its chunk's inverse at token t (the tail of a padded
    last chunk is not there, so only its real tokens are compared)."""
    if A.shape == (n, c, c):
        return [A[i] for i in range(n)], [c] * n
    if token_layout and A.ndim == 4 and A.shape[-1] == c:
        blocks, valid = [], []
        for row, first, head, v in chunks.astype(_np.int64):
            block = _np.full((c, c), _np.nan)
            block[:v, :v] = A[row, first:first + v, head, :v]
            blocks.append(block)
            valid.append(int(v))
        return blocks, valid
    want = f"[N, C, C] = ({n}, {c}, {c})" + (f", or fla's [B, T, H, C] with C = {c}" if token_layout else "")
    raise ValueError(f"assert_inverse_close: the candidate's shape {tuple(A.shape)} is not {want}")


def _where(i, chunks, token_layout, valid, c):
    if not token_layout:
        return f"chunk {i}"
    row, first, head, v = (int(x) for x in chunks[i])
    tail = f", {v} of {c} tokens" if v < c else ""
    return f"chunk {i} (batch row {row}, tokens {first}..{first + v - 1}, head {head}{tail})"


def assert_inverse_close(A, keys, g, beta, *, cu_seqlens=None, chunk=0, tail="pad", rel_rmse=5e-3, atol=None,
                         rtol=None, msg=None):
    """Fails (AssertionError) unless the candidate inverse ``A`` is close to the gold inverse of the inputs.

    ``keys``, ``g``, ``beta`` (and ``cu_seqlens``, ``chunk``, ``tail``) are those of ``chunkinv.gold``, any
    array type: NumPy, torch (CPU or CUDA), DLPack. ``A`` is [N, C, C], or fla's [B, T, H, C] for inputs in
    fla's layout. Each chunk must have a relative RMSE (SPEC §3, ``inv_total_rel_rmse``) of at most
    ``rel_rmse`` (None: not checked); with ``atol`` and/or ``rtol`` (the other taken as 0), every element
    must also be within ``atol + rtol * |gold|``. Where the gold overflows (a non-finite entry), the
    candidate must be non-finite too; the finite entries are compared. The message names the chunks that
    fail, the worst of them (where it came from in fla's layout), its worst element and the figures."""
    if rel_rmse is None and atol is None and rtol is None:
        raise ValueError("assert_inverse_close: give rel_rmse, atol or rtol")
    k, gg, b, cu, single = _inputs(keys, g, beta, cu_seqlens)
    gold = _core.gold(k, gg, b, cu, chunk, tail, 0)["INV"]
    where = _core.chunked(k, gg, b, cu, chunk, tail)["chunks"]
    n, c = gold.shape[0], gold.shape[1]
    token_layout = len(k.shape) == 4
    cand = _numpy(_array(A, "A"))
    if single and cand.shape == (c, c):
        cand = cand[None]
    blocks, valid = _blocks(cand, n, c, where, token_layout)

    atol_, rtol_ = (atol or 0.0), (rtol or 0.0)
    elementwise = atol is not None or rtol is not None
    failures = []  # (badness, i, rmse, (r, col), reason)
    for i in range(n):
        v = valid[i]
        a, e = blocks[i][:v, :v], gold[i][:v, :v]
        fin = _np.isfinite(e)
        overflow_missed = ~fin & _np.isfinite(a)
        err = _np.where(fin, _np.abs(a - _np.where(fin, e, 0.0)), 0.0)
        err = _np.where(_np.isfinite(a) | ~fin, err, _np.inf)  # a non-finite candidate where the gold is finite
        r = _rel_rmse(_np.where(fin, a, 0.0), _np.where(fin, e, 0.0))
        reasons = []
        if overflow_missed.any():
            reasons.append(f"finite where the gold is not at {int(overflow_missed.sum())} entries")
        if rel_rmse is not None and not r <= rel_rmse:
            reasons.append(f"relative RMSE {r:.3e} > {rel_rmse:.1e}")
        if elementwise:
            allowed = atol_ + rtol_ * _np.abs(_np.where(fin, e, 0.0))
            over = fin & ~(err <= allowed)
            if over.any():
                reasons.append(f"{int(over.sum())} of {v * v} elements beyond atol + rtol * |gold|")
        if reasons:
            flat = int(_np.argmax(_np.where(overflow_missed, _np.inf, err)))
            failures.append((r if _np.isfinite(r) else _np.inf, i, r, divmod(flat, v), "; ".join(reasons)))
    if not failures:
        return

    failures.sort(key=lambda f: (-f[0], f[1]))
    _, i, r, (row, col), reason = failures[0]
    a, e = blocks[i][row, col], gold[i][row, col]
    diff = abs(a - e) if _np.isfinite(a) and _np.isfinite(e) else _np.inf
    rel = diff / abs(e) if e != 0 and _np.isfinite(e) else _np.inf
    lines = [
        f"Inverse not close to the gold: {len(failures)} of {n} chunks fail "
        f"(rel_rmse={rel_rmse}, atol={atol}, rtol={rtol}).",
        f"Worst: {_where(i, where, token_layout, valid[i], c)}: {reason}.",
        f"Its worst element: INV[{row}, {col}] = {a:.6g} vs gold {e:.6g} "
        f"(absolute error {diff:.3e}, relative {rel:.3e}).",
    ]
    if len(failures) > 1:
        others = ", ".join(str(f[1]) for f in failures[1:6]) + (", ..." if len(failures) > 6 else "")
        lines.append(f"Other failing chunks, worst first: {others}.")
    if msg:
        lines.insert(0, str(msg))
    raise AssertionError("\n".join(lines))
