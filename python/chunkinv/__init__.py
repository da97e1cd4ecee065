"""chunkinv from Python: the gold inverse, every CPU path and method, the
per-sample metrics and scoring of a kernel's own L / INV, on NumPy arrays
or anything that exports DLPack (torch tensors on the CPU or a CUDA GPU,
BF16 included, read where they lie) or has ``__array__``; the GPU paths
where there is a GPU; reports as pandas DataFrames; pytest assertions in
``chunkinv.testing``. Results are NumPy arrays. See docs/python.md.

Inputs are those of ``chunkinv run --inputs``: ``keys [N, C, d]``, ``g [N, C]``,
``beta [N, C]`` (one chunk per sample; ``[C, d]`` / ``[C]`` for a single
sample), or the fla/FlashKDA layout ``keys [B, T, H, K]``, ``g [B, T, H]``,
``beta [B, T, H]`` with optional ``cu_seqlens``, cut into chunks of ``chunk``
tokens (``tail="pad"`` or ``"drop"`` for a sequence's shorter last chunk).
Keys are rounded to BF16 as the tool does; nothing is normalised.
"""
import json as _json
import math as _math

import numpy as _np

from . import _core

__all__ = ["paths", "methods", "gold", "inverse", "score", "chunked", "recurrence", "recurrence_backward", "aggregate",
           "run", "load_report", "testing", "version"]
version = _core.version


def _array(x, name):
    """x as the C++ module reads it: a NumPy array of a number type (through its buffer), or an object that
    exports DLPack (torch tensors on the CPU or a CUDA GPU, BF16 included: read where they lie, widened
    exactly); anything else (lists, ``__array__``) as NumPy converts it."""
    if x is None:
        return None
    if isinstance(x, _np.ndarray):
        a = x
    elif hasattr(x, "__dlpack__") and hasattr(x, "shape"):
        # torch refuses to export a tensor that requires grad; its values are all that is read.
        return x.detach() if callable(getattr(x, "detach", None)) else x
    elif hasattr(x, "__dlpack__") and _dlpack_on_cpu(x):
        a = _np.from_dlpack(x)  # no shape to read: NumPy's view of the same memory
    else:
        try:
            a = _np.asarray(x)
        except (TypeError, RuntimeError, ValueError):
            a = None
        if (a is None or a.dtype == object) and callable(getattr(x, "float", None)):
            a = _np.asarray(x.float())  # a tensor type NumPy cannot hold: widened in its own library (exact)
        if a is None:
            raise TypeError(f"{name}: cannot read a {type(x).__name__} as an array")
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{name}: dtype {a.dtype} is not a number type")
    return a


def _dlpack_on_cpu(x):
    return not hasattr(x, "__dlpack_device__") or x.__dlpack_device__()[0] == 1  # kDLCPU


def _lead(x):
    """One sample given without its batch axis: that axis added (a view for NumPy, torch and DLPack CPU data)."""
    try:
        return x[None]
    except TypeError:
        return _np.from_dlpack(x)[None]


def _ndim(x):
    return len(x.shape)


def _inputs(keys, g, beta, cu_seqlens):
    k, gg, b = _array(keys, "keys"), _array(g, "g"), _array(beta, "beta")
    single = _ndim(k) == 2 and _ndim(gg) in (1, 2) and _ndim(b) == 1  # one sample: [C, d], [C] (or [C, d]), [C]
    if single:
        k, gg, b = _lead(k), _lead(gg), _lead(b)
    cu = None if cu_seqlens is None else _array(cu_seqlens, "cu_seqlens")
    return k, gg, b, cu, single


def paths():
    """Every path of the registry: name, device, reference, arithmetic, unavailable ('' where it runs here)."""
    return _core.paths()


def methods():
    """Every inverse method of the registry: name, arithmetic, exact, diagnostics, params."""
    return _core.methods()


def gold(keys, g, beta, *, cu_seqlens=None, chunk=0, tail="pad", threads=0):
    """The FP64 gold of every sample: {"L": [N, C, C], "INV": [N, C, C], "metrics": {name: [N]}}."""
    k, gg, b, cu, _ = _inputs(keys, g, beta, cu_seqlens)
    return _core.gold(k, gg, b, cu, chunk, tail, threads)


def inverse(keys, g, beta, *, path="emulated", method="", cu_seqlens=None, chunk=0, tail="pad", threads=0):
    """One path and method (as on the command line: "emulated", "neumann"; "" is the default method) on every
    sample: {"L", "INV" [N, C, C], "decay", "inv_decay" [N, C] where the path forms them,
    "metrics": {name: [N]}} (the per-sample metrics against the gold, SPEC §3)."""
    k, gg, b, cu, _ = _inputs(keys, g, beta, cu_seqlens)
    return _core.inverse(k, gg, b, path, method, cu, chunk, tail, threads)


def score(inv, keys, g, beta, *, L=None, decay=None, inv_decay=None, method="", cu_seqlens=None, chunk=0,
          tail="pad", threads=0):
    """A kernel's own INV (and/or L: pass inv=None to score L alone) against the gold, as path ``candidate``
    of ``chunkinv score``: {"L", "INV", "metrics": {name: [N]}}. ``method`` names the arithmetic the kernel
    implements (its CPU reference gives the diagnostics and the gold-L twin; "exact" claims none). Without L,
    the L scored is the one INV inverts exactly (l_rel_rmse is then INV's backward error)."""
    k, gg, b, cu, one = _inputs(keys, g, beta, cu_seqlens)

    def mat(x, name):
        a = _array(x, name)
        return _lead(a) if a is not None and one and _ndim(a) == 2 else a

    def row(x, name):
        a = _array(x, name)
        return _lead(a) if a is not None and one and _ndim(a) == 1 else a

    return _core.score(mat(inv, "inv"), mat(L, "L"), k, gg, b, row(decay, "decay"), row(inv_decay, "inv_decay"),
                       method, cu, chunk, tail, threads)


def chunked(keys, g, beta, *, cu_seqlens=None, chunk=0, tail="pad"):
    """The samples the tool makes of the inputs: {"keys" [N, C, d], "g", "beta" [N, C], "chunks" [N, 4]
    (batch row, first token, head, valid tokens of each chunk)}."""
    k, gg, b, cu, _ = _inputs(keys, g, beta, cu_seqlens)
    return _core.chunked(k, gg, b, cu, chunk, tail)


def recurrence(q, k, v, g, beta, *, scale=None, initial_state=None, cu_seqlens=None, threads=0):
    """The layer's forward by the FP64 token recurrence (docs/downstream.md; fla's naive recurrence, in FP64),
    on inputs in fla's layout: ``q``, ``k`` [B, T, H, K], ``v`` [B, T, H, V], ``g`` [B, T, H] (one gate per
    token, Gated DeltaNet) or [B, T, H, K] (per channel, KDA), natural-log gates; ``beta`` [B, T, H];
    optional ``initial_state`` [N, H, K, V] and ``cu_seqlens`` [N + 1] (then B = 1). ``scale`` defaults to
    K^-1/2. k is read as ``seq --inputs`` reads it (rounded to BF16, as the kernels read it); the rest
    exactly. Returns {"o": [B, T, H, V], "final_state": [N, H, K, V]} in float64."""
    arrays = [_array(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"), (g, "g"), (beta, "beta"))]
    return _core.recurrence(*arrays, None if scale is None else float(scale), _array(initial_state, "initial_state"),
                            _array(cu_seqlens, "cu_seqlens"), threads)


def recurrence_backward(q, k, v, g, beta, do, *, dht=None, scale=None, initial_state=None, cu_seqlens=None, threads=0):
    """The FP64 recurrence's gradients (docs/downstream.md, "Backward") of ``sum(do * o) + sum(dht * ht)`` with
    respect to every input of ``chunkinv.recurrence`` (the same arguments), given ``do`` [B, T, H, V] and optionally
    ``dht`` [N, H, K, V]: {"dq", "dk" [B, T, H, K], "dv" [B, T, H, V], "dg" as g, "dbeta" [B, T, H],
    "dh0" [N, H, K, V]} in float64, with respect to the inputs as read (k in BF16; no normalisation inside)."""
    arrays = [_array(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"), (g, "g"), (beta, "beta"), (do, "do"))]
    return _core.recurrence_backward(*arrays, _array(dht, "dht"), None if scale is None else float(scale),
                                     _array(initial_state, "initial_state"), _array(cu_seqlens, "cu_seqlens"), threads)


def aggregate(values, *, flag=False):
    """The report's statistics of per-sample values (median with infinities last, mean of the finite, p10,
    p90, p99, p999 (p99.9), p999999 (p99.9999), min, max, finite_count; Wilson interval for a 0/1 metric with flag=True)."""
    return _core.aggregate(_np.asarray(_host(values), dtype=_np.float64).ravel(), flag)


def _axis(name, value):
    """-a's text of one axis: a value, or a list of values as [v1,v2]."""
    if isinstance(value, (list, tuple)):
        return f"{name}=[{','.join(str(v) for v in value)}]"
    return f"{name}={value}"


def run(*configs, axes=(), inputs=None, samples=None, seed=None, paths=None, metrics=None, quantiles=None,
        per_sample=False, worst=None, by=None, shard=None, until=None, until_ci=None, pipeline=None, devices=None,
        threads=0, batch=None, max_memory=None, output=None, resume=False, dry_run=False):
    """An experiment as ``chunkinv run`` runs it, through the same library calls (prepare, execute): the
    report as a dict, the JSON that ``run -o`` writes (also written to ``output`` when given, saved as it goes
    beside it as the command line does). ``configs``: config files; ``axes``: ``-a`` texts ("chunk=[16,32]")
    or a dict {name: value or list}; ``paths``: "gold,emulated"; ``metrics``: a list or "a,b"; ``quantiles``:
    "auto", "exact" or "sketch"; ``shard``: "i/n"; ``until``/``until_ci``: stop rules as text;
    ``max_memory``: bytes or "8G". The rest as the command line's options of the same name. Every option is
    checked before anything runs: a bad one is a ValueError with the command line's message. With dry_run,
    the plan ``run --dry-run`` prints, as text."""
    r = _core.RunRequest()
    r.configs = [str(c) for c in configs]
    r.axes = [_axis(k, v) for k, v in axes.items()] if isinstance(axes, dict) else [str(a) for a in axes]
    r.inputs = "" if inputs is None else str(inputs)
    r.samples = 0 if samples is None else samples
    r.seed = seed
    r.paths = paths or ""
    r.metrics = [] if not metrics else metrics.split(",") if isinstance(metrics, str) else list(metrics)
    r.quantiles = quantiles or ""
    r.per_sample = per_sample
    r.worst = worst or 0
    r.worst_by = by or ""
    r.shard, r.until, r.until_ci = shard or "", until or "", until_ci or ""
    r.pipeline, r.devices = pipeline or "", devices or ""
    r.threads = threads
    r.batch = batch or 0
    if isinstance(max_memory, str):
        r.max_memory = _core.parse_size(max_memory)
    elif max_memory is not None:
        r.max_memory = max_memory
    r.output = "" if output is None else str(output)
    r.resume, r.dry_run = resume, dry_run
    given = {k: v for k, v in locals().items() if k not in ("r", "configs") and v not in (None, False, (), 0, "")}
    r.argv = ["chunkinv.run", *r.configs, *(f"{k}={v!r}" for k, v in given.items())]
    out = _core.run(r)
    return out if dry_run else _json.loads(out)


def _host(x):
    """A small array (per-sample values) as NumPy, wherever it lies: torch tensors are moved and widened."""
    if isinstance(x, _np.ndarray) or not callable(getattr(x, "detach", None)):
        return x
    return x.detach().cpu().double().numpy()


def _number(v):
    if isinstance(v, str):
        return {"inf": _math.inf, "-inf": -_math.inf, "nan": _math.nan}[v]
    return float(v)


def load_report(path, *, per_sample=None):
    """A report (schema chunkinv.report/1 or /2, as `table` and `check` read it) as a tidy pandas DataFrame.

    One row per configuration x path x method x metric x statistic (columns: every axis, ``samples``,
    ``seed``, ``metric``, ``statistic``, ``value``), or, when the report has per-sample values (``run
    --per-sample``) and per_sample is not False, one row per sample (``sample`` instead of ``statistic``).
    ``value`` is float64 with infinities as floats; it is the only numeric column: axes, ``samples``,
    ``seed``, ``sample``, ``metric`` and ``statistic`` are categorical (compare them with plain values:
    ``df[df.chunk == 16]``)."""
    import pandas as pd

    report = _json.loads(_core.read_report(str(path)))
    results = report.get("results", [])
    has_ps = bool(results) and all(e.get("per_sample") for e in results)
    if per_sample and not has_ps:
        raise ValueError(f"report {path}: has no per-sample values (run --per-sample)")
    use_ps = has_ps if per_sample is None else bool(per_sample)
    axes = []
    for e in results:
        for k in e["axes"]:
            if k not in axes:
                axes.append(k)
    records = []
    for e in results:
        base = {k: e["axes"].get(k) for k in axes}
        base["samples"], base["seed"] = e.get("samples"), e.get("seed")
        if use_ps:
            for metric, values in e["per_sample"].items():
                for i, v in enumerate(values):
                    records.append({**base, "metric": metric, "sample": i, "value": _number(v)})
        else:
            for metric, stats in e["metrics"].items():
                for stat, v in stats.items():
                    records.append({**base, "metric": metric, "statistic": stat, "value": _number(v)})
    last = "sample" if use_ps else "statistic"
    columns = axes + ["samples", "seed", "metric", last, "value"]
    df = pd.DataFrame.from_records(records, columns=columns)
    for c in columns[:-1]:
        df[c] = df[c].astype("category")
    df["value"] = df["value"].astype("float64")
    return df


from . import testing  # noqa: E402  (chunkinv.testing.assert_inverse_close; it uses the functions above)
