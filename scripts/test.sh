#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite through ctest, then the
# Python package's pytest (scripts/python-setup.sh) on the module the same
# build made (build/python); fails when either fails. GPU tests skip with a
# message where there is no GPU.
#   TEST_PYTHON=OFF   ctest only (no Python packages installed, no pytest)
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA sources are compiled wherever nvcc is, GPU or not, so that a
# machine without a GPU (CI) still checks that they build; their tests skip.
if [ -z "${CHUNKINV_CUDA:-}" ] && { command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  export CHUNKINV_CUDA=ON
fi
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
