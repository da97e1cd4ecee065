#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite through ctest. GPU tests
# skip with a message where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA sources are compiled wherever nvcc is, GPU or not, so that a
# machine without a GPU (CI) still checks that they build; their tests skip.
if [ -z "${CHUNKINV_CUDA:-}" ] && { command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  export CHUNKINV_CUDA=ON
fi
. scripts/setup.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
