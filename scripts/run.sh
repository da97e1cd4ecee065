#!/usr/bin/env bash
# Sets up, builds, and runs the default experiment (configs/quickstart.json)
# on every path this machine offers: the GPU paths where there is a GPU,
# otherwise the CPU emulation of the kernel. Prints the summary table; the
# JSON report lands in build/quickstart.json. Extra arguments go to `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
./"$BUILD_DIR"/chunkinv info
./"$BUILD_DIR"/chunkinv run configs/quickstart.json --paths all -o "$BUILD_DIR/quickstart.json" "$@"
