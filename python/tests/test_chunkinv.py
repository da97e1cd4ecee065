"""The Python package against the command line: the gold and every CPU
path's inverse equal what `chunkinv inspect` shows, bit for bit; score()
reproduces a path's metrics from its own L and INV; reports load as tidy
DataFrames. The binary is $CHUNKINV_BINARY (scripts/python-setup.sh sets
it), else build/chunkinv of this checkout."""
import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import chunkinv

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("CHUNKINV_BINARY", str(ROOT / "build" / "chunkinv"))


def cli(*args):
    if not Path(BINARY).exists():
        pytest.fail(f"no chunkinv binary at {BINARY}: build it, or set CHUNKINV_BINARY")
    r = subprocess.run([BINARY, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def num(x):
    """inspect's JSON: numbers, or "inf", "-inf", "nan"."""
    if isinstance(x, list):
        return np.array([num(v) for v in x], dtype=np.float64)
    return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[x] if isinstance(x, str) else float(x)


def same_bits(a, b):
    """Equal bit for bit (so 0.0 != -0.0); NaN where the other has NaN (JSON's "nan" carries no payload)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    keep = ~np.isnan(a)
    return np.array_equal(a[keep].view(np.uint64), b[keep].view(np.uint64))


CASES = [  # (family axes, sample): finite, and one whose decays overflow (inf / nan entries)
    (["--family", "model_like", "-a", "chunk=16", "-a", "dim=64"], 5),
    (["--family", "floor", "-a", "chunk=20", "-a", "dim=32", "-a", "decay_floor=-5"], 1),
    (["--family", "weak_decay_correlated", "-a", "chunk=24", "-a", "dim=16"], 0),
]


@pytest.mark.parametrize("axes,index", CASES)
def test_gold_and_emulated_inverse_match_inspect_bit_for_bit(axes, index):
    j = json.loads(cli("inspect", *axes, "--sample", str(index), "--paths", "emulated", "--format", "json"))
    keys = num(j["keys"]["values"])
    g, beta = num(j["g"]), num(j["beta"])
    gold = chunkinv.gold(keys, g, beta)
    assert same_bits(gold["L"][0], num(j["gold"]["L"]))
    assert same_bits(gold["INV"][0], num(j["gold"]["INV"]))
    emu = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")
    shown = j["paths"]["emulated"]
    assert same_bits(emu["L"][0], num(shown["L"]))
    assert same_bits(emu["decay"][0], num(shown["decay"]))
    assert same_bits(emu["inv_decay"][0], num(shown["inv_decay"]))
    assert same_bits(emu["INV"][0], num(shown["methods"]["neumann"]["INV"]))
    metrics = shown["methods"]["neumann"]["metrics"]
    assert set(emu["metrics"]) == set(metrics)
    for name, v in metrics.items():
        assert same_bits(emu["metrics"][name][0], num(v)), name


def test_paths_and_methods_are_the_registries():
    listed_paths = [line.split(":")[0].split(" ")[0] for line in cli("run", "--list-paths").splitlines() if line and not line.startswith(" ")]
    assert [p["name"] for p in chunkinv.paths()] == listed_paths
    listed_methods = [line.split(":")[0] for line in cli("run", "--list-methods").splitlines() if line and not line.startswith(" ")]
    assert [m["name"] for m in chunkinv.methods()] == listed_methods
    # Every CPU path runs every method on a batch, with that method's metrics.
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((3, 16, 32))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    g = -rng.uniform(0.05, 1.0, (3, 16))
    beta = rng.uniform(0.1, 0.9, (3, 16))
    for p in chunkinv.paths():
        if p["unavailable"] or p["device"] != "cpu":
            continue
        for m in chunkinv.methods():
            out = chunkinv.inverse(keys, g, beta, path=p["name"], method=m["name"])
            assert out["INV"].shape == (3, 16, 16)
            assert all(out["metrics"][d].shape == (3,) for d in m["diagnostics"])
            assert out["metrics"]["inv_total_rel_rmse"].shape == (3,)
    # The gold path's exact solve is the gold itself.
    assert np.all(chunkinv.inverse(keys, g, beta, path="gold", method="exact")["metrics"]["inv_total_rel_rmse"] == 0)


def test_score_of_a_paths_own_matrices_is_that_paths_metrics():
    rng = np.random.default_rng(1)
    keys = rng.standard_normal((6, 32, 64))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    g = -5 / (1 + np.exp(-rng.standard_normal((6, 32))))
    beta = 1 / (1 + np.exp(-rng.standard_normal((6, 32))))
    emu = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")
    got = chunkinv.score(emu["INV"], keys, g, beta, L=emu["L"], decay=emu["decay"], inv_decay=emu["inv_decay"],
                         method="neumann")
    assert set(got["metrics"]) == set(emu["metrics"])
    for name in emu["metrics"]:
        assert same_bits(got["metrics"][name], emu["metrics"][name]), name
    # A perturbed INV scores worse, on that sample only.
    bad = emu["INV"].copy()
    bad[2, 20, 3] += 1e-2
    worse = chunkinv.score(bad, keys, g, beta, L=emu["L"], method="neumann")["metrics"]["inv_total_rel_rmse"]
    assert worse[2] > emu["metrics"]["inv_total_rel_rmse"][2]
    assert np.array_equal(np.delete(worse, 2), np.delete(emu["metrics"]["inv_total_rel_rmse"], 2))


class OnlyArray:
    """Stands for a tensor type NumPy knows through __array__ (torch CPU tensors have it)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None):
        return self.a if dtype is None else self.a.astype(dtype)


class OnlyDLPack:
    """Stands for a tensor reached through DLPack only."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __array__(self, dtype=None):
        raise TypeError("no __array__ here")


class Bf16Like:
    """Like a torch.bfloat16 tensor: no NumPy view of its own, but .float() widens it exactly."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None):
        raise TypeError("Got unsupported ScalarType BFloat16")

    def float(self):
        return self.a.astype(np.float32)


def test_array_likes_and_dtypes_give_the_same_numbers():
    rng = np.random.default_rng(2)
    keys = rng.standard_normal((2, 8, 16)).astype(np.float32)
    g = -rng.uniform(0.1, 2.0, (2, 8)).astype(np.float32)
    beta = rng.uniform(0.2, 0.8, (2, 8)).astype(np.float32)
    want = chunkinv.inverse(keys, g, beta, path="emulated")["INV"]
    for wrap in (OnlyArray, OnlyDLPack, Bf16Like):
        got = chunkinv.inverse(wrap(keys), wrap(g), wrap(beta), path="emulated")["INV"]
        assert same_bits(got, want), wrap.__name__
    # One sample without its batch axis.
    assert same_bits(chunkinv.inverse(keys[1], g[1], beta[1], path="emulated")["INV"][0], want[1])


def test_torch_tensors_when_torch_is_there():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    keys = torch.tensor(rng.standard_normal((2, 16, 32)), dtype=torch.bfloat16)
    g = -torch.rand(2, 16, dtype=torch.float32) - 0.01
    beta = torch.rand(2, 16, dtype=torch.float32) * 0.8 + 0.1
    got = chunkinv.gold(keys, g, beta)["INV"]
    want = chunkinv.gold(keys.float().numpy(), g.numpy(), beta.numpy())["INV"]
    assert same_bits(got, want)


def test_token_layout_with_cu_seqlens_and_zero_gates():
    rng = np.random.default_rng(4)
    t, h, k = 40, 2, 16
    keys = rng.standard_normal((1, t, h, k))
    g = -rng.uniform(0.01, 1.0, (1, t, h))
    g[0, 3, 0], g[0, 4, 1] = -0.0, 0.0  # a decay of exactly 1, both signs
    beta = rng.uniform(0.1, 0.9, (1, t, h))
    cu = np.array([0, 13, 40])
    s = chunkinv.chunked(keys, g, beta, cu_seqlens=cu, chunk=16)
    # 13 -> one padded chunk; 27 -> 16 + 11 padded; two heads each.
    assert s["keys"].shape == (6, 16, k)
    assert s["chunks"][:, 3].tolist() == [13, 13, 16, 16, 11, 11]
    assert s["chunks"][:, 1].tolist() == [0, 0, 13, 13, 29, 29]
    dropped = chunkinv.chunked(keys, g, beta, cu_seqlens=cu, chunk=16, tail="drop")
    assert dropped["keys"].shape[0] == 2
    out = chunkinv.inverse(keys, g, beta, cu_seqlens=cu, chunk=16, path="emulated")
    assert np.all(np.isfinite(out["INV"]))
    # Padding rows are exact on the emulated path too.
    assert np.array_equal(out["INV"][0, 13:, 13:], np.eye(3))


def test_bad_inputs_are_value_errors_naming_the_culprit():
    keys = np.ones((1, 4, 8)) / math.sqrt(8)
    beta = np.full((1, 4), 0.5)
    with pytest.raises(ValueError, match=r"arrays\[g\]: entry \[0, 2\] = 0.5 is not <= 0"):
        chunkinv.gold(keys, np.array([[-1.0, -1.0, 0.5, -1.0]]), beta)
    with pytest.raises(ValueError, match="unknown path"):
        chunkinv.inverse(keys, -np.ones((1, 4)), beta, path="emulatd")
    with pytest.raises(ValueError, match=r"arrays\[beta\]"):
        chunkinv.gold(keys, -np.ones((1, 4)), np.full((1, 4), 1.5))


def test_per_channel_gates_give_the_per_channel_gold():
    rng = np.random.default_rng(3)
    keys = rng.integers(-4, 5, size=(1, 4, 8)) / 8.0  # exact in BF16: nothing rounded on the way in
    beta = np.full((1, 4), 0.5)
    gc = -np.ones((1, 4, 8))
    # Channels that agree are one gate per token.
    assert np.array_equal(chunkinv.gold(keys, gc, beta)["L"], chunkinv.gold(keys, -np.ones((1, 4)), beta)["L"])
    gc[0, 1, 5] = -2.0
    got = chunkinv.gold(keys, gc, beta)["L"][0]
    G = np.cumsum(gc[0], axis=0)
    want = np.zeros((4, 4))
    for i in range(4):
        for j in range(i):
            want[i, j] = 0.5 * np.sum(keys[0, i] * keys[0, j] * np.exp(np.minimum(G[i] - G[j], 0.0)))
    assert np.allclose(got, want, rtol=1e-12, atol=1e-15)  # entries that cancel to ~1e-17 are zero in L
    assert not np.allclose(got, chunkinv.gold(keys, -np.ones((1, 4)), beta)["L"][0])
    # The kernel's model forms a decay per element, and says so in the shape.
    out = chunkinv.inverse(keys, gc, beta, path="emulated")
    assert out["decay"].shape == (1, 4, 8) and out["inv_decay"].shape == (1, 4, 8)
    assert out["decay"][0, 1, 5] < out["decay"][0, 1, 4]  # the faster-decaying channel
    assert chunkinv.inverse(keys, -np.ones((1, 4)), beta, path="emulated")["decay"].shape == (1, 4)


def test_aggregate_is_the_reports():
    v = np.array([3.0, 1.0, math.inf, 2.0])
    s = chunkinv.aggregate(v)
    assert set(s) == {"median", "mean", "p10", "p90", "p99", "p999", "p999999", "min", "max", "finite_count"}
    assert all(isinstance(x, float) for x in s.values())
    assert s["median"] == 2.5 and s["max"] == math.inf and s["mean"] == 2.0 and s["finite_count"] == 3
    assert s["min"] == 1.0
    # A 0/1 metric: its finite share with the Wilson interval, as in reports.
    f = chunkinv.aggregate(np.array([1.0, 0.0, 1.0, 1.0]), flag=True)
    assert set(f) == set(s) | {"wilson_low", "wilson_high"}
    assert f["mean"] == 0.75 and 0 < f["wilson_low"] < 0.75 < f["wilson_high"] < 1


def test_load_report_of_a_committed_report_is_tidy():
    path = ROOT / "results" / "cpu" / "k3_exponent_boundary-n3.json"
    raw = json.loads(path.read_text())
    df = chunkinv.load_report(path)
    assert list(df.select_dtypes("number").columns) == ["value"]
    assert df["value"].dtype == np.float64
    expected_rows = sum(len(stats) for e in raw["results"] for stats in e["metrics"].values())
    assert len(df) == expected_rows
    for axis in ("family", "chunk", "dim", "path", "method", "decay_floor"):  # method: added by the reader (schema /1)
        assert axis in df.columns
    assert {"metric", "statistic", "samples", "seed"} <= set(df.columns)
    # Infinities are floats, and a value can be found by its axes.
    assert np.isinf(df["value"]).any()
    e = raw["results"][1]
    row = df[(df.chunk == e["axes"]["chunk"]) & (df.path == e["axes"]["path"])
             & (df.metric == "inv_total_rel_rmse") & (df.statistic == "median")]
    assert len(row) == 1
    assert row["value"].iloc[0] == num(e["metrics"]["inv_total_rel_rmse"]["median"])


def test_load_report_per_sample(tmp_path):
    out = tmp_path / "r.json"
    cli("run", "-a", "family=floor", "-a", "chunk=[8,19]", "--samples", "5", "--paths", "gold,emulated",
        "--per-sample", "-q", "-o", str(out))
    df = chunkinv.load_report(out)
    assert "sample" in df.columns and "statistic" not in df.columns
    assert list(df.select_dtypes("number").columns) == ["value"]
    raw = json.loads(out.read_text())
    assert len(df) == sum(len(v) for e in raw["results"] for v in e["per_sample"].values())
    stats = chunkinv.load_report(out, per_sample=False)
    assert "statistic" in stats.columns
