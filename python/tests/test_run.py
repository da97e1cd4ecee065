"""chunkinv.run() against `chunkinv run`: both go through the library's
prepare() and execute(), so a sweep gives the same results, bit for bit
(the JSON text of every figure), a meta that differs only in the times and
the invocation, the same plan for a dry run, and the same message for a bad
option. The binary is $CHUNKINV_BINARY, else build/chunkinv."""
import json
import os
import subprocess
from pathlib import Path

import pytest

import chunkinv

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("CHUNKINV_BINARY", str(ROOT / "build" / "chunkinv"))


def cli(*args, ok=True):
    if not Path(BINARY).exists():
        pytest.fail(f"no chunkinv binary at {BINARY}: build it, or set CHUNKINV_BINARY")
    r = subprocess.run([BINARY, "run", *args], capture_output=True, text=True)
    assert (r.returncode == 0) == ok, r.stderr
    return r


SWEEPS = [  # (the command line's options, chunkinv.run's keyword arguments)
    (["-a", "family=[floor,model_like]", "-a", "chunk=[16,24]", "-a", "method=[neumann,blockwise]",
      "--samples", "40", "--seed", "7", "--paths", "gold,emulated"],
     dict(axes={"family": ["floor", "model_like"], "chunk": [16, 24], "method": ["neumann", "blockwise"]},
          samples=40, seed=7, paths="gold,emulated")),
    (["-a", "family=weak_decay_correlated", "-a", "chunk=16", "--samples", "30", "--metrics",
      "inv_total_rel_rmse,inv_finite", "--quantiles", "sketch", "--threads", "1", "--worst", "2"],
     dict(axes=["family=weak_decay_correlated", "chunk=16"], samples=30, metrics=["inv_total_rel_rmse", "inv_finite"],
          quantiles="sketch", threads=1, worst=2)),
]


@pytest.mark.parametrize("args,kwargs", SWEEPS)
def test_run_gives_the_commands_report(tmp_path, args, kwargs):
    out = tmp_path / "cli.json"
    cli(*args, "-q", "-o", str(out))
    by_cli = json.loads(out.read_text())
    by_py = chunkinv.run(**kwargs)
    assert by_py["results"] == by_cli["results"]
    assert by_py["schema"] == by_cli["schema"]
    differ = {k for k in by_cli["meta"].keys() | by_py["meta"].keys() if by_cli["meta"].get(k) != by_py["meta"].get(k)}
    assert differ <= {"argv", "started", "finished"}
    assert by_py["meta"]["argv"][0] == "chunkinv.run"


def test_run_writes_the_output_as_the_command_does(tmp_path):
    out = tmp_path / "py.json"
    report = chunkinv.run(axes=["chunk=16"], samples=20, output=out)
    assert json.loads(out.read_text())["results"] == report["results"]
    assert not (tmp_path / "py.json.ckpt").exists()


def test_dry_run_is_the_commands_plan():
    plan = chunkinv.run(axes=["chunk=[16,32]"], samples=10, dry_run=True)
    assert plan == cli("-a", "chunk=[16,32]", "--samples", "10", "--dry-run").stdout


@pytest.mark.parametrize("args,kwargs", [
    (["-a", "chunk=16", "--quantiles", "exactly"], dict(axes=["chunk=16"], quantiles="exactly")),
    (["-a", "chunk=16", "--shard", "1/2", "--until", "inv_finite.failures>=1"],
     dict(axes=["chunk=16"], shard="1/2", until="inv_finite.failures>=1")),
    (["-a", "chunk=16", "--pipeline", "gpu"], dict(axes=["chunk=16"], pipeline="gpu")),
    ([], dict()),
])
def test_bad_options_are_the_commands_messages(args, kwargs):
    message = cli(*args, ok=False).stderr.strip().removeprefix("chunkinv: ")
    with pytest.raises(ValueError) as e:
        chunkinv.run(**kwargs)
    assert str(e.value) == message
