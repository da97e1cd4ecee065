#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer and
# UndefinedBehaviorSanitizer (RelWithDebInfo, no CUDA) into build-sanitize/
# and runs it through ctest. Every sanitizer report fails the test that made
# it: UBSan does not recover, and a report exits with status 86, which no
# test expects (`check` exits 1 and 2 by design). The binary the tests run
# is the sanitized one.
#
# The checks that need an address-space limit (ulimit -v, RLIMIT_AS),
# which AddressSanitizer's shadow memory cannot live with, skip themselves
# (tests/support/sanitizer.hpp); `exclude` below leaves out any test that
# cannot. Installs what is missing with apt-get, as scripts/setup.sh does.
#
#   scripts/sanitize.sh [CTEST ARGS...]     # e.g. -R 'Spec|Report'
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'sanitize: %s\n' "$*" >&2; }
# What is missing is installed (Debian/Ubuntu, apt-get), as scripts/setup.sh does.
install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v apt-get > /dev/null; then
    say "missing $*; install them with your package manager"
    exit 1
  fi
  say "installing $* with apt-get"
  $sudo apt-get update -q 2>&1 | sed -u 's/^/sanitize: apt: /' >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@" 2>&1 |
    sed -un 's/^\(Get:[0-9]*\|Unpacking\|Setting up\) \([^ ]*\).*/sanitize: apt: \1 \2/p' >&2
}
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
need=()
command -v cmake > /dev/null || need+=(cmake)
command -v g++ > /dev/null || need+=(g++)
command -v make > /dev/null || command -v ninja > /dev/null || need+=(make)
have_header eigen3/Eigen/Core || need+=(libeigen3-dev)
have_header CLI/CLI.hpp || need+=(libcli11-dev)
have_header fmt/format.h || need+=(libfmt-dev)
have_header nlohmann/json.hpp || need+=(nlohmann-json3-dev)
have_header zlib.h || need+=(zlib1g-dev)
have_header nettle/sha2.h || need+=(nettle-dev)
have_header gtest/gtest.h || need+=(libgtest-dev)
[ ${#need[@]} -eq 0 ] || install "${need[@]}"
# The sanitizers' runtimes (libasan, libubsan) come with g++ on Debian; say
# so plainly where they do not.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'int main() { return 0; }' > "$probe/p.cpp"
if ! g++ -fsanitize=address,undefined "$probe/p.cpp" -o "$probe/p" 2> "$probe/err"; then
  cat "$probe/err" >&2
  say "g++ cannot link -fsanitize=address,undefined: install its libasan and libubsan"
  exit 1
fi

dir=build-sanitize
# Tests that cannot run under AddressSanitizer (see above); a ctest regex.
exclude='^$'
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
start=$(date +%s)
# No Python module: an instrumented one cannot load into an uninstrumented
# interpreter, and building it would only cost time.
# -g1: line tables only, enough for a report's file:line, and cheaper to
# compile than full debug information (CI has 2 cores).
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHUNKINV_CUDA=OFF -DCHUNKINV_PYTHON=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log" >&2; exit 1; }
cmake --build "$dir" -j "$(nproc)" > "$dir.build.log" 2>&1 ||
  { grep -E -A5 'error' "$dir.build.log" | head -60 >&2; echo "sanitize: build failed, see $dir.build.log" >&2; exit 1; }
built=$(date +%s)

export ASAN_OPTIONS="exitcode=86:detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="exitcode=86:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="exitcode=86"
rc=0
(cd "$dir" && ctest --output-on-failure -j "$(nproc)" -E "$exclude" "$@") || rc=$?
echo "sanitize: build $((built - start)) s, tests $(($(date +%s) - built)) s, ctest exit $rc" >&2
exit "$rc"
