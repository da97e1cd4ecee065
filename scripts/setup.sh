#!/usr/bin/env bash
# Sourced by run.sh and test.sh: installs what is missing (Debian/Ubuntu,
# when it can), then configures and builds into build/ (CUDA paths too when
# nvcc is found).
set -euo pipefail

need=()
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
command -v cmake > /dev/null || need+=(cmake)
command -v g++ > /dev/null || need+=(g++)
have_header eigen3/Eigen/Core || need+=(libeigen3-dev)
have_header CLI/CLI.hpp || need+=(libcli11-dev)
have_header fmt/format.h || need+=(libfmt-dev)
have_header nlohmann/json.hpp || need+=(nlohmann-json3-dev)
have_header gtest/gtest.h || need+=(libgtest-dev)
have_header zlib.h || need+=(zlib1g-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if command -v apt-get > /dev/null; then
    echo "setup: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" > /dev/null
  else
    echo "setup: missing ${need[*]}; install them with your package manager" >&2
    exit 1
  fi
fi

# nvcc is often installed outside PATH.
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release > "$BUILD_DIR.configure.log" 2>&1 ||
  { cat "$BUILD_DIR.configure.log" >&2; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" > "$BUILD_DIR.build.log" 2>&1 ||
  { grep -E -A5 'error' "$BUILD_DIR.build.log" | head -60 >&2; echo "setup: build failed, see $BUILD_DIR.build.log" >&2; exit 1; }
