#!/usr/bin/env bash
# Sets up, builds the chunkinv binary (not the tests), and runs the default
# experiment (configs/quickstart.json) on every path this machine offers:
# the GPU paths where there is a GPU driver, otherwise the CPU emulation of
# the kernel. Prints the summary table; the JSON report lands in
# build/quickstart.json. Extra arguments go to `run`. Each step is named on
# stderr as it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_TARGET=chunkinv SETUP_TESTS="${SETUP_TESTS:-AUTO}" . scripts/setup.sh
echo "run: what this build and machine offer (chunkinv info)" >&2
./"$BUILD_DIR"/chunkinv info
echo "run: the default experiment, configs/quickstart.json on every usable path" >&2
./"$BUILD_DIR"/chunkinv run configs/quickstart.json --paths all -o "$BUILD_DIR/quickstart.json" "$@"
