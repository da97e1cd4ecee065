#!/usr/bin/env bash
# Fuzzes the tensor, config, axis and report readers: builds the seven
# libFuzzer targets of tests/fuzz/ (clang, AddressSanitizer,
# UndefinedBehaviorSanitizer) into build-fuzz/ without CUDA, then runs each
# for SECONDS (default 30) from its seed corpus tests/fuzz/corpus/<target>/.
# New inputs go to build-fuzz/corpus/<target>/, crashing ones to
# build-fuzz/crashes/. Prints executions and coverage per
# target; exit status 1 when a target crashed (a sanitizer report, an
# uncaught exception other than UsageError, a timeout or too much memory).
#
#   scripts/fuzz.sh [SECONDS-PER-TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
case "$secs" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS-PER-TARGET]" >&2; exit 2 ;; esac
targets=(npy npz safetensors tensor_set config axis report)

install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v apt-get > /dev/null; then
    echo "fuzz: missing $*; install them with your package manager" >&2
    exit 1
  fi
  echo "fuzz: installing $*" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" > /dev/null
}
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
need=()
command -v cmake > /dev/null || need+=(cmake)
command -v clang++ > /dev/null || need+=(clang)
have_header eigen3/Eigen/Core || need+=(libeigen3-dev)
have_header CLI/CLI.hpp || need+=(libcli11-dev)
have_header fmt/format.h || need+=(libfmt-dev)
have_header nlohmann/json.hpp || need+=(nlohmann-json3-dev)
have_header zlib.h || need+=(zlib1g-dev)
have_header nettle/sha2.h || need+=(nettle-dev)
[ ${#need[@]} -eq 0 ] || install "${need[@]}"
# libFuzzer's runtime comes with clang's compiler-rt, a separate package on some releases.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
if ! clang++ -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" 2> /dev/null; then
  install libclang-rt-dev
fi

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
[ -e build-fuzz/CMakeCache.txt ] && generator=()
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCHUNKINV_FUZZ=ON -DCHUNKINV_CUDA=OFF -DBUILD_TESTING=OFF > build-fuzz.configure.log 2>&1 ||
  { cat build-fuzz.configure.log >&2; exit 1; }
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" > build-fuzz.build.log 2>&1 ||
  { grep -E -A5 'error' build-fuzz.build.log | head -60 >&2; echo "fuzz: build failed, see build-fuzz.build.log" >&2; exit 1; }

failed=0
mkdir -p build-fuzz/crashes
printf '%-12s %8s %14s %8s %8s  %s\n' target seconds executions cov ft result
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/fuzz_$t.log"
  rc=0
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: 2 GiB.
  "build-fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/crashes/$t-" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" > "$log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  last="$(grep -E '^#[0-9]+' "$log" | tail -1)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")"
  result=ok
  if [ "$rc" -ne 0 ]; then
    failed=1
    result="CRASH (exit $rc): $(grep -m1 -E 'ERROR|runtime error|deadly signal|uncaught' "$log" || true); see $log"
  fi
  printf '%-12s %8s %14s %8s %8s  %s\n' "$t" "$secs" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
exit "$failed"
