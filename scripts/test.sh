#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite through ctest. GPU tests
# skip with a message where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
cd - > /dev/null && BUILD_DIR="$BUILD_DIR" scripts/python-setup.sh  # the Python package and examples (pytest)
