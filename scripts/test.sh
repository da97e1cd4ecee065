#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite through ctest, then the
# Python package's pytest (scripts/python-setup.sh) on the module the same
# build made (build/python); fails when either fails. GPU tests skip with a
# message where there is no GPU.
#   TEST_PYTHON=OFF   ctest only (no Python packages installed, no pytest)
set -euo pipefail
cd "$(dirname "$0")/.."
# The GPU paths are built where a GPU driver is (scripts/setup.sh decides):
# without a GPU their tests could only skip, and nvcc's compile of them is
# most of a first build on 2 cores. CHUNKINV_CUDA=ON builds them anyway
# (.ci/run does, wherever nvcc is, so that CI checks that they compile).
python="${TEST_PYTHON:-ON}"
# Debian's Python packages first: the build makes the Python module where
# they are (pybind11, DLPack), the plot script's ctest tests (PlotScript.*)
# draw with /usr/bin/python3's matplotlib, and pytest needs the rest.
[ "$python" = OFF ] || scripts/python-setup.sh --deps
. scripts/setup.sh
ctest_rc=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" "$@") || ctest_rc=$?
py_rc=0
[ "$python" = OFF ] || BUILD_DIR="$BUILD_DIR" scripts/python-setup.sh || py_rc=$?
[ "$ctest_rc" -eq 0 ] || echo "test: ctest failed (exit $ctest_rc)" >&2
[ "$py_rc" -eq 0 ] || echo "test: the Python package's pytest failed (exit $py_rc)" >&2
exit $((ctest_rc != 0 ? ctest_rc : py_rc))
