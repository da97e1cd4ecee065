"""scripts/plot.py: its default width grows with the panel count, and started
with a Python that lacks matplotlib it runs itself again with one that has
it, or says in one line how to get one. (Its figures are tested by the
ctest tests PlotScript.*.)"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLOT = ROOT / "scripts" / "plot.py"
# Six chunk sizes, two paths: six panels with --facet chunk.
REPORT = ROOT / "results" / "cpu" / "k3_exponent_boundary-n3.json"


def have_matplotlib():
    ok = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib, numpy"], capture_output=True).returncode == 0
    if not ok and os.environ.get("CI") == "true":
        pytest.fail("CI: /usr/bin/python3 has no matplotlib/numpy (scripts/test.sh installs python3-matplotlib)")
    return ok


pytestmark = pytest.mark.skipif(not have_matplotlib(), reason="/usr/bin/python3 has no matplotlib and numpy")


def png_width(path):
    data = Path(path).read_bytes()
    assert data[1:4] == b"PNG"
    return int.from_bytes(data[16:20], "big")


def plot(python, *args, env=None):
    return subprocess.run([python, str(PLOT), str(REPORT), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_the_default_width_grows_with_the_panels(tmp_path):
    png = tmp_path / "f.png"
    six = plot("/usr/bin/python3", "--x", "path", "--facet", "chunk", "--dpi", "100", "-o", str(png))
    assert six.returncode == 0, six.stderr
    assert png_width(png) == 716  # the text width for six panels (in two rows of three)
    two = plot("/usr/bin/python3", "--x", "path", "--facet", "chunk", "--where", "chunk=8,16", "--dpi", "100",
               "-o", str(png))
    assert two.returncode == 0, two.stderr
    assert png_width(png) == 350  # one column for two


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A venv's python3 without the system's packages: no matplotlib, no numpy."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python3")
    assert subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode != 0
    return python


def test_a_python_without_matplotlib_hands_over_to_one_with_it(tmp_path, bare_python):
    png = tmp_path / "f.png"
    r = plot(bare_python, "--dpi", "100", "-o", str(png))
    assert r.returncode == 0, r.stderr
    assert png_width(png) == 350


def test_without_any_it_says_in_one_line_how_to_get_one(tmp_path, bare_python):
    r = plot(bare_python, "-o", str(tmp_path / "f.png"), env={"CHUNKINV_PLOT_PYTHON": "/nonexistent/python3"})
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"plot.py: {bare_python} lacks matplotlib")
    assert "apt-get install python3-matplotlib" in r.stderr
