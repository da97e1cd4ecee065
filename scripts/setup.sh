#!/usr/bin/env bash
# Sourced by run.sh and test.sh: installs what is missing (Debian/Ubuntu,
# when it can), then configures and builds into $BUILD_DIR (default build/),
# saying what it does at each step on stderr.
#   SETUP_TARGET      what to build (default: everything, the tests too;
#                     run.sh builds only the chunkinv binary)
#   SETUP_TESTS       ON: the tests are configured (GoogleTest needed);
#                     AUTO (run.sh): kept as the build folder has them, OFF in a new one
#   PYTHON            the interpreter the Python module chunkinv._core is
#                     built for, in the same build (default /usr/bin/python3,
#                     whose Debian packages scripts/python-setup.sh installs);
#                     built where pybind11 is found, into $BUILD_DIR/python
#   CHUNKINV_CUDA     ON or OFF: the GPU paths; default ON where an NVIDIA
#                     driver is loaded and nvcc is found, or where the build
#                     folder has them and nvcc is found, else OFF
# A second run checks the few headers, skips the configuration and
# rebuilds only what changed: seconds.
set -euo pipefail

say() { printf 'setup: %s\n' "$*" >&2; }
BUILD_DIR="${BUILD_DIR:-build}"
SETUP_TESTS="${SETUP_TESTS:-ON}"
SETUP_TARGET="${SETUP_TARGET:-}"

tests=$SETUP_TESTS
if [ "$tests" = AUTO ]; then
  tests=OFF
  if [ -f "$BUILD_DIR/CMakeCache.txt" ] && grep -q '^BUILD_TESTING:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then tests=ON; fi
fi

say "checking the build tools and libraries"
need=()
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
command -v cmake > /dev/null || need+=(cmake)
command -v g++ > /dev/null || need+=(g++)
command -v make > /dev/null || command -v ninja > /dev/null || need+=(make)
have_header eigen3/Eigen/Core || need+=(libeigen3-dev)
have_header CLI/CLI.hpp || need+=(libcli11-dev)
have_header fmt/format.h || need+=(libfmt-dev)
have_header nlohmann/json.hpp || need+=(nlohmann-json3-dev)
have_header zlib.h || need+=(zlib1g-dev)
have_header nettle/sha2.h || need+=(nettle-dev)
if [ "$tests" = ON ]; then have_header gtest/gtest.h || need+=(libgtest-dev); fi
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if command -v apt-get > /dev/null; then
    say "installing ${need[*]} with apt-get"
    $sudo apt-get update -q 2>&1 | sed -u 's/^/setup: apt: /' >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}" 2>&1 |
      sed -un 's/^\(Get:[0-9]*\|Unpacking\|Setting up\) \([^ ]*\).*/setup: apt: \1 \2/p' >&2
  else
    say "missing ${need[*]}; install them with your package manager"
    exit 1
  fi
fi

# The GPU paths: only where a GPU driver is loaded, unless asked for.
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"  # nvcc is often installed outside PATH
fi
cached() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" 2> /dev/null; }
cuda="${CHUNKINV_CUDA:-}"
if [ -z "$cuda" ]; then
  if [ -e /proc/driver/nvidia/version ] || timeout 10 nvidia-smi -L > /dev/null 2>&1; then
    cuda=ON
    command -v nvcc > /dev/null || { cuda=OFF; say "an NVIDIA driver but no nvcc: building the CPU paths only"; }
  elif [ "$(cached CHUNKINV_CUDA)" = ON ] && command -v nvcc > /dev/null; then
    # A build folder that has them (test.sh compiles them wherever nvcc is)
    # keeps them: switching would rebuild everything, twice when run.sh and
    # test.sh take turns; without a driver they say so and run nothing.
    cuda=ON
    say "no NVIDIA driver: keeping the GPU paths $BUILD_DIR/ was configured with (they report no GPU; CHUNKINV_CUDA=OFF drops them)"
  else
    cuda=OFF
    say "no NVIDIA driver: building the CPU paths only (CHUNKINV_CUDA=ON builds the GPU paths anyway)"
  fi
fi

# A folder configured before pybind11 and DLPack's header were installed
# (run.sh, then test.sh installs them) is configured again to find them:
# seconds, and nothing already built is rebuilt.
module_now_possible() {
  [ "$(cached CHUNKINV_PYTHON)" = AUTO ] && [ -e /usr/include/pybind11/pybind11.h ] && [ -e /usr/include/dlpack/dlpack.h ] &&
    compgen -G "/usr/include/python3*/Python.h" > /dev/null &&
    ! { grep -q '^pybind11_DIR:PATH=/' "$BUILD_DIR/CMakeCache.txt" && grep -q '^CHUNKINV_DLPACK_INCLUDE:PATH=/' "$BUILD_DIR/CMakeCache.txt"; } 2> /dev/null
}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] || [ "$(cached CHUNKINV_CUDA)" != "$cuda" ] || [ "$(cached BUILD_TESTING)" != "$tests" ] ||
  module_now_possible; then
  say "configuring into $BUILD_DIR/ (GPU paths $cuda, tests $tests; log $BUILD_DIR.configure.log)"
  mkdir -p "$BUILD_DIR"
  python=()
  [ ! -x "${PYTHON:-/usr/bin/python3}" ] || python=(-DPython3_EXECUTABLE="${PYTHON:-/usr/bin/python3}")
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCHUNKINV_CUDA="$cuda" -DBUILD_TESTING="$tests" "${python[@]}" \
    > "$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log" >&2; say "configuration failed"; exit 1; }
fi

# Build, one line per step ("[ 42%] compiling src/core/fp.cpp"), kept on
# one line when stderr is a terminal. (A shell loop: awk would read the
# pipe in blocks and print the steps late.)
say "building ${SETUP_TARGET:-everything} with $(nproc) jobs (log $BUILD_DIR.build.log)"
if [ -t 2 ]; then end='\r\033[K'; else end='\n'; fi
cmake --build "$BUILD_DIR" -j "$(nproc)" ${SETUP_TARGET:+--target "$SETUP_TARGET"} 2>&1 | tee "$BUILD_DIR.build.log" |
  while IFS= read -r line; do
    case $line in
      \[*\]\ Building*) f=${line##* }; f=${f#*.dir/}; printf "setup: %s compiling %s$end" "${line%%]*}]" "${f%.o}" >&2 ;;
      \[*\]\ Linking*) printf "setup: %s linking %s$end" "${line%%]*}]" "${line##* }" >&2 ;;
    esac
  done ||
  { [ -t 2 ] && printf '\n' >&2; grep -E -A5 'error' "$BUILD_DIR.build.log" | head -60 >&2; say "build failed, see $BUILD_DIR.build.log"; exit 1; }
[ -t 2 ] && printf '\r\033[K' >&2
say "built $BUILD_DIR/chunkinv"
