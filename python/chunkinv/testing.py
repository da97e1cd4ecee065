"""pytest helpers for a kernel: its inverse (I + L)^-1 against the FP64 gold
inverse of the same inputs, and its layer output (and final state) against
the FP64 token recurrence, each with a failure message that says where the
error is (docs/python.md).

    from chunkinv.testing import assert_inverse_close, assert_output_close
    assert_inverse_close(A, k, g, beta, cu_seqlens=cu, chunk=64)
    assert_output_close(o, q, k, v, g, beta, final_state=ht, cu_seqlens=cu)

The tolerance reads as fla's ``assert_close`` (a relative RMSE, here per chunk
and as SPEC §3 defines it: the metric ``inv_total_rel_rmse`` of ``chunkinv
score``) and, when ``atol`` or ``rtol`` is given, also as
``torch.testing.assert_close`` (every element within ``atol + rtol * |gold|``).
"""
import numpy as _np

from . import _array, _core, _inputs, recurrence, recurrence_backward

__all__ = ["assert_inverse_close", "assert_output_close", "assert_gradients_close"]


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


def _spans(cu_seqlens, batch, tokens):
    """(batch row, first token, tokens) of every sequence, as ``chunkinv.recurrence`` reads them."""
    if cu_seqlens is None:
        return [(b, 0, tokens) for b in range(batch)]
    cu = _numpy(_array(cu_seqlens, "cu_seqlens")).astype(_np.int64).ravel()
    return [(0, int(cu[i]), int(cu[i + 1] - cu[i])) for i in range(len(cu) - 1)]


def _compare(a, e, rel_rmse, atol, rtol):
    """One sequence head's figures: its relative RMSE, the reasons it fails, the index of its worst element."""
    fin_a = _np.isfinite(a)
    err = _np.where(fin_a, _np.abs(a - e), _np.inf)
    r = _rel_rmse(a, e)
    reasons = []
    if not fin_a.all():
        reasons.append(f"{int((~fin_a).sum())} non-finite elements")
    elif rel_rmse is not None and not r <= rel_rmse:
        reasons.append(f"relative RMSE {r:.3e} > {rel_rmse:.1e}")
    if atol is not None or rtol is not None:
        over = ~(err <= (atol or 0.0) + (rtol or 0.0) * _np.abs(e))
        if over.any():
            reasons.append(f"{int(over.sum())} of {e.size} elements beyond atol + rtol * |reference|")
    return r, reasons, _np.unravel_index(int(_np.argmax(err)), e.shape)


def _candidate(x, name, want, layout, who):
    """A candidate tensor as float64 NumPy of the reference's shape, or a one-line ValueError."""
    a = _numpy(_array(x, name))
    if a.shape != want:
        raise ValueError(f"{who}: {name} has shape {tuple(a.shape)}, not {layout} = {want}")
    return a


def _check(tensors, spans, heads, rel_rmse, atol, rtol, block, title, msg):
    """Every sequence head of every (name, candidate, reference, per_token) against the tolerances; an
    AssertionError naming the worst. Per-token tensors are [B, T, H, ...] (sequence n's tokens of batch row
    spans[n]); the others [N, H, ...] (one a sequence)."""
    failures = []  # (badness, name, n, h, r, index, reasons)
    for name, cand, ref, per_token in tensors:
        for n, (row, first, count) in enumerate(spans):
            for h in range(heads):
                a, e = (cand[row, first:first + count, h], ref[row, first:first + count, h]) if per_token else \
                       (cand[n, h], ref[n, h])
                r, reasons, idx = _compare(a, e, rel_rmse, atol, rtol)
                if reasons:
                    failures.append((r if _np.isfinite(r) else _np.inf, name, n, h, r, idx, reasons))
    if not failures:
        return
    failures.sort(key=lambda f: (-f[0], f[2], f[3], f[1]))
    _, name, n, h, r, idx, reasons = failures[0]
    cand, ref, per_token = next((c, e, p) for nm, c, e, p in tensors if nm == name)
    row, first, count = spans[n]
    heads_failing = len({(f[2], f[3]) for f in failures})
    lines = [f"{title}: {heads_failing} of {len(spans) * heads} sequence heads fail "
             f"(rel_rmse={rel_rmse}, atol={atol}, rtol={rtol}).",
             f"Worst: sequence {n} (batch row {row}, tokens {first}..{first + count - 1}), head {h}: "
             f"{name} {'; '.join(reasons)}."]
    if per_token:
        t, rest = int(idx[0]), tuple(int(x) for x in idx[1:])
        at = (row, first + t, h) + rest
        a, e = cand[at], ref[at]
        lines.append(f"Its worst element: {name}[{', '.join(map(str, at))}] = {a:.6g} vs {e:.6g} "
                     f"(absolute error {abs(a - e):.3e}).")
        a_all, e_all = cand[row, first:first + count, h], ref[row, first:first + count, h]
        bad = [i for i in range(count) if not _np.isfinite(a_all[i]).all()]
        if bad:
            lines.append(f"Its first non-finite token: {first + bad[0]}.")
        else:
            blocks = [(_rel_rmse(a_all[b:b + block], e_all[b:b + block]), b) for b in range(0, count, block)]
            worst, b = max(blocks)
            lines.append(f"Its worst {block}-token block: tokens {first + b}..{first + min(b + block, count) - 1}, "
                         f"relative RMSE {worst:.3e} (the first block {blocks[0][0]:.3e}, the last {blocks[-1][0]:.3e}).")
    else:
        at = (n, h) + tuple(int(x) for x in idx)
        a, e = cand[at], ref[at]
        lines.append(f"Its worst element: {name}[{', '.join(map(str, at))}] = {a:.6g} vs {e:.6g} "
                     f"(absolute error {abs(a - e):.3e}).")
    if len(failures) > 1:
        others = ", ".join(f"{f[1]} of sequence {f[2]} head {f[3]}" for f in failures[1:6])
        lines.append(f"Others, worst first: {others}{', ...' if len(failures) > 6 else ''}.")
    if msg:
        lines.insert(0, str(msg))
    raise AssertionError("\n".join(lines))


def assert_output_close(o, q, k, v, g, beta, *, final_state=None, scale=None, initial_state=None, cu_seqlens=None,
                        rel_rmse=5e-3, atol=None, rtol=None, block=64, msg=None):
    """Fails (AssertionError) unless a kernel's layer output ``o`` [B, T, H, V] (and, where given, its
    ``final_state`` [N, H, K, V], fla's ``ht``) is close to the FP64 token recurrence of the same inputs
    (``chunkinv.recurrence``: fla's layout, any array type, CUDA tensors included).

    Each sequence head (one head of one sequence, the sample of ``chunkinv seq``) must have a relative RMSE
    (SPEC §3, the metric ``o_rel_rmse`` of ``chunkinv seq --candidate``) of at most ``rel_rmse`` (None: not
    checked), and no non-finite element; with ``atol`` and/or ``rtol`` (the other taken as 0), every element
    must also be within ``atol + rtol * |reference|``. The final state is held to the same tolerances. The
    message names the failing sequence heads, the worst of them, its worst element, and the ``block`` tokens
    where its error is largest (a chunked kernel's bad chunk shows there)."""
    if rel_rmse is None and atol is None and rtol is None:
        raise ValueError("assert_output_close: give rel_rmse, atol or rtol")
    ref = recurrence(q, k, v, g, beta, scale=scale, initial_state=initial_state, cu_seqlens=cu_seqlens)
    ro, rh = ref["o"], ref["final_state"]
    who = "assert_output_close"
    tensors = [("o", _candidate(o, "o", ro.shape, "[B, T, H, V]", who), ro, True)]
    if final_state is not None:
        tensors.append(("final_state", _candidate(final_state, "final_state", rh.shape, "[N, H, K, V]", who), rh, False))
    B, T, H, _ = ro.shape
    _check(tensors, _spans(cu_seqlens, B, T), H, rel_rmse, atol, rtol, block,
           "Output not close to the FP64 recurrence", msg)


_GRADIENT_LAYOUTS = {"dq": "[B, T, H, K]", "dk": "[B, T, H, K]", "dv": "[B, T, H, V]", "dg": "g's",
                     "dbeta": "[B, T, H]", "dh0": "[N, H, K, V]"}


def assert_gradients_close(grads, q, k, v, g, beta, do, *, dht=None, scale=None, initial_state=None,
                           cu_seqlens=None, rel_rmse=5e-3, atol=None, rtol=None, block=64, msg=None):
    """Fails (AssertionError) unless a kernel's gradients are close to the FP64 recurrence's
    (``chunkinv.recurrence_backward``) for the same inputs and upstream gradient ``do`` (and ``dht``).

    ``grads`` maps any of ``dq``, ``dk``, ``dv``, ``dg``, ``dbeta``, ``dh0`` to the kernel's tensor (fla's
    names and layouts; any array type, CUDA tensors included); each sequence head of each is held to the
    tolerances of ``assert_output_close`` (``rel_rmse`` per sequence head: the metrics ``dq_rel_rmse``, ... of
    ``chunkinv seq --candidate``). The message names the gradient, sequence, head, worst element and worst
    ``block`` tokens."""
    if rel_rmse is None and atol is None and rtol is None:
        raise ValueError("assert_gradients_close: give rel_rmse, atol or rtol")
    unknown = sorted(set(grads) - set(_GRADIENT_LAYOUTS))
    if unknown or not grads:
        raise ValueError(f"assert_gradients_close: grads names {unknown or 'nothing'}; it takes "
                         f"{', '.join(_GRADIENT_LAYOUTS)}")
    ref = recurrence_backward(q, k, v, g, beta, do, dht=dht, scale=scale, initial_state=initial_state,
                              cu_seqlens=cu_seqlens)
    who = "assert_gradients_close"
    tensors = [(name, _candidate(x, name, ref[name].shape, _GRADIENT_LAYOUTS[name], who), ref[name], name != "dh0")
               for name, x in grads.items()]
    B, T, H = ref["dbeta"].shape
    _check(tensors, _spans(cu_seqlens, B, T), H, rel_rmse, atol, rtol, block,
           "Gradients not close to the FP64 recurrence's", msg)
