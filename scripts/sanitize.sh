#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer and
# UndefinedBehaviorSanitizer (RelWithDebInfo, no CUDA) into build-sanitize/
# and runs it through ctest. Every sanitizer report fails the test that made
# it: UBSan does not recover, and a report exits with status 86, which no
# test expects (`check` exits 1 and 2 by design). The binary the tests run
# is the sanitized one.
#
# Left out (ctest -E): the tests that run under an address-space limit
# (ulimit -v, RLIMIT_AS), which AddressSanitizer's shadow memory cannot
# live with; they skip themselves where they can (docs/reliability.md).
#
#   scripts/sanitize.sh [CTEST ARGS...]     # e.g. -R 'Spec|Report'
set -euo pipefail
cd "$(dirname "$0")/.."

have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
missing=()
command -v cmake > /dev/null || missing+=(cmake)
command -v g++ > /dev/null || missing+=(g++)
for h in eigen3/Eigen/Core CLI/CLI.hpp fmt/format.h nlohmann/json.hpp gtest/gtest.h; do
  have_header "$h" || missing+=("$h")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "sanitize: missing ${missing[*]}; scripts/setup.sh installs them" >&2
  exit 1
fi

dir=build-sanitize
# Tests that cannot run under AddressSanitizer (see above); a ctest regex.
exclude='^$'
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
start=$(date +%s)
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHUNKINV_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$dir.configure.log" 2>&1 ||
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
