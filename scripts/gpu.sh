#!/usr/bin/env bash
# One call on the GPU machine: configure and build (Release, sm_90, build-gpu),
# optionally measure the decay exception table and rebuild with it, run every
# test (GPU tests included), `chunkinv info`, `chunkinv bench`, and
# optionally the experiments into results/h200. Logs and JSON go to $OUT
# (at most 8 files come back from the device: the list is below), and a
# short summary table is printed last.
#
#   scripts/gpu.sh [--calibrate] [--experiments] [--no-tests] [--no-bench]
#                  [--sanitize] [--bench-samples N]
#
# --sanitize runs the GPU tests (gtest filter Gpu*) once more under each of
# compute-sanitizer's memcheck and racecheck; any error fails the step
# (--error-exitcode), and sanitize.log keeps both reports.
#
# The GPU build is the README's build with the CUDA architecture given.
#
# Files under $OUT: build.log, decay_exceptions.inc (with --calibrate),
# tests.log, sanitize.log (with --sanitize), info.json, bench.log, bench.json, summary.txt,
# experiments.log and results-h200.tar.gz (with --experiments).
set -uo pipefail
cd "$(dirname "$0")/.."

CALIBRATE=0 EXPERIMENTS=0 TESTS=1 BENCH=1 SANITIZE=0 BENCH_SAMPLES=65536
while [ $# -gt 0 ]; do
  case "$1" in
    --calibrate) CALIBRATE=1 ;;
    --experiments) EXPERIMENTS=1 ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    --sanitize) SANITIZE=1 ;;
    --bench-samples) BENCH_SAMPLES="$2"; shift ;;
    *) echo "gpu.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
B=build-gpu
JOBS="$(nproc)"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
T_START=$(date +%s)

# step NAME LOG command...: runs, appends to LOG, records status and seconds.
step() {
  local name="$1" log="$2"; shift 2
  local t0=$(date +%s%N)
  echo "=== $name: $*" >> "$log"
  "$@" >> "$log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%-26s %-6s %6d.%01d s\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo "rc=$rc")" $((ms / 1000)) $((ms % 1000 / 100)) >> "$SUMMARY"
  return $rc
}

BUILD_LOG="$OUT/build.log"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; nvcc --version | tail -2; cmake --version | head -1; } > "$BUILD_LOG" 2>&1
GEN=""
command -v ninja > /dev/null && GEN="-G Ninja"
step configure "$BUILD_LOG" cmake -S . -B "$B" $GEN -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_FLAGS=-Xptxas=-v" || { cat "$SUMMARY"; tail -40 "$BUILD_LOG"; exit 1; }
KEEP_GOING=""
[ -n "$GEN" ] && KEEP_GOING="-- -k 0"  # ninja: every error in one log, and every target that can be built
if ! step build "$BUILD_LOG" cmake --build "$B" -j "$JOBS" $KEEP_GOING; then
  grep -E -A6 'error:|FAILED:' "$BUILD_LOG" | head -60
  [ -x "$B/chunkinv" ] || { cat "$SUMMARY"; exit 1; }  # without the tool nothing below can run
fi

if [ "$CALIBRATE" = 1 ]; then
  step calibrate-decay "$BUILD_LOG" "$B/chunkinv" calibrate-decay -o src/arith/decay_exceptions.inc
  cp src/arith/decay_exceptions.inc "$OUT/decay_exceptions.inc"
  grep -m1 'calibrate-decay: [0-9]' "$BUILD_LOG" >> "$SUMMARY"
  step rebuild "$BUILD_LOG" cmake --build "$B" -j "$JOBS" $KEEP_GOING
fi

TEST_LOG="$OUT/tests.log"
if [ "$TESTS" = 1 ]; then
  # Every test through ctest: the GPU tests verbosely (they print their
  # agreement figures) and one at a time (one GPU), the others in parallel.
  # The pipelines against the host loop at scale (issue 42): 10^5 samples a
  # configuration, three seeds (about 3 min); PIPELINE_SCALE_SAMPLES=1000000
  # for the full size (about 30 min: a command of its own).
  export CHUNKINV_PIPELINE_SCALE_SAMPLES="${PIPELINE_SCALE_SAMPLES:-100000}" CHUNKINV_PIPELINE_SCALE_SEEDS=1,2,3
  step ctest-gpu "$TEST_LOG" ctest --test-dir "$B" -V -R '^Gpu|^DevicePipelineGpu' --timeout 2400
  step ctest-cpu "$TEST_LOG" ctest --test-dir "$B" -j "$JOBS" --output-on-failure -E '^Gpu|^DevicePipelineGpu' --timeout 900
fi

step info "$OUT/info.json" "$B/chunkinv" info --format json
"$B/chunkinv" info >> "$SUMMARY" 2>&1

if [ "$SANITIZE" = 1 ]; then
  # compute-sanitizer over the GPU tests: memcheck (out-of-bounds and
  # misaligned accesses, leaks of device memory) and racecheck (shared-memory
  # hazards). The tests are the ctest ones, run from the test binary.
  CS="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  SAN_LOG="$OUT/sanitize.log"
  "$CS" --version > "$SAN_LOG" 2>&1
  step memcheck "$SAN_LOG" "$CS" --tool memcheck --leak-check full --error-exitcode 99 "$B/chunkinv_tests" --gtest_filter='Gpu*'
  step racecheck "$SAN_LOG" "$CS" --tool racecheck --racecheck-report all --error-exitcode 99 "$B/chunkinv_tests" --gtest_filter='Gpu*'
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|\[  (PASSED|FAILED) ' "$SAN_LOG" >> "$SUMMARY"
fi

BENCH_LOG="$OUT/bench.log"
if [ "$BENCH" = 1 ]; then
  # Every path and method at C = 16, 32, 64 (the kernel validated against the
  # emulated path first), then the kernel's first version on the same sizes.
  step bench-floor-16 "$BENCH_LOG" "$B/chunkinv" bench -a family=floor -a chunk=16 -a 'method=[neumann,fwdsub_fp32]' --samples "$BENCH_SAMPLES" -o "$OUT/bench.json"
  step bench-model_like-32 "$BENCH_LOG" "$B/chunkinv" bench -a family=model_like -a chunk=32 --samples "$BENCH_SAMPLES" --repeat 3
  step bench-model_like-64 "$BENCH_LOG" "$B/chunkinv" bench -a family=model_like -a chunk=64 --samples 16384 --repeat 3 --cpu-samples 512
  step bench-v1 "$BENCH_LOG" "$B/chunkinv" bench --paths kernel:version=1 -a 'family=[floor]' -a 'chunk=[16,32]' --samples "$BENCH_SAMPLES" --repeat 5
  step bench-v1-64 "$BENCH_LOG" "$B/chunkinv" bench --paths kernel:version=1 -a family=model_like -a chunk=64 --samples 16384 --repeat 5
fi

if [ "$EXPERIMENTS" = 1 ]; then
  # The article's three experiments at 3 and 10^4 samples on all four paths,
  # with their tables and commands (scripts/reproduce.sh), into results/h200.
  step reproduce "$OUT/experiments.log" env BUILD_DIR="$B" RESULTS_DIR=results/h200 scripts/reproduce.sh --no-build --large 10000
  tar czf "$OUT/results-h200.tar.gz" results/h200
fi

# Short table last: steps, the GPU tests' figures, the bench table.
{
  echo
  echo "--- GPU test figures"
  grep -E '^([0-9]+: )?(mma|ex2|conversions|cublas|fast)' "$TEST_LOG" 2>/dev/null | cut -c1-220
  # kernel vs emulated / padding lines: only those with a difference, and a count.
  ZERO='(decays 0/[0-9]+, L 0/[0-9]+, INV 0/[0-9]+, gold-L INV 0/[0-9]+, powers/max 0|: 0 differing elements.*)$'
  grep -E '^([0-9]+: )?kernel' "$TEST_LOG" 2>/dev/null | grep -vE "$ZERO" | cut -c1-220
  echo "kernel comparisons: $(grep -cE '^([0-9]+: )?kernel' "$TEST_LOG" 2>/dev/null) lines," \
       "$(grep -E '^([0-9]+: )?kernel' "$TEST_LOG" 2>/dev/null | grep -cE "$ZERO") with no difference"
  grep -E '^\[  (FAILED|PASSED) ' "$TEST_LOG" 2>/dev/null
  grep -E 'tests passed|tests failed|\*\*\*Failed|Not Run' "$TEST_LOG" 2>/dev/null
  echo
  echo "--- bench"
  grep -E '^(bench|configuration|floor|model_like|weak_decay_correlated) ' "$BENCH_LOG" 2>/dev/null | cut -c1-220
  echo
  echo "total $(( $(date +%s) - T_START )) s"
} >> "$SUMMARY"
cat "$SUMMARY"
