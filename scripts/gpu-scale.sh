#!/usr/bin/env bash
# The fidelity checks of docs/notes/fidelity.md at their full size, on a GPU machine, each step under a time
# limit and logged to $OUT/scale.log as it goes (what a killed call had done still comes back):
#
#   scripts/gpu-scale.sh raw                # kernel vs emulated on FlashKDA's raw inputs: five seeds, five gate settings
#   scripts/gpu-scale.sh pipeline 16,24,32  # --pipeline device vs host, 10^6 samples, seeds 1, 2, 3, check --exact;
#                                           # the reports come back in pipeline-reports.tgz: unpacked into .ext/scale
#                                           # (carried), a later call takes them instead of running them again
#   scripts/gpu-scale.sh both 16,24         # both
#
# The build goes to /tmp/b (kept between calls on a warm machine). nettle-dev, where the machine lacks it, is read
# from .ext/nettle (Debian's package unpacked there: a carried, ignored folder).
#   SCALE_SAMPLES (default 1000000), SCALE_SEEDS (default 1,2,3)
set -uo pipefail
what="${1:-both}" chunks="${2:-16,24,32,48,64}"
N="${SCALE_SAMPLES:-1000000}" SEEDS="${SCALE_SEEDS:-1,2,3}"
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
L=$OUT/scale.log
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*" | tee -a "$L"; }

source "$(dirname "$0")/carried-nettle.sh"  # NET: nettle-dev from .ext/nettle where missing
# SCALE_PYTHON=AUTO also builds the Python module (for the python3 on PATH, the one with torch); DLPack's header is
# read from .ext/dlpack where the machine lacks it
PYOPT=(-DCHUNKINV_PYTHON=OFF)
if [ "${SCALE_PYTHON:-OFF}" != OFF ]; then
  PYOPT=(-DCHUNKINV_PYTHON="$SCALE_PYTHON" -DPython3_EXECUTABLE="$(command -v python3)")
  [ -e /usr/include/dlpack/dlpack.h ] || PYOPT+=(-DCHUNKINV_DLPACK_INCLUDE="$PWD/.ext/dlpack")
  pbd=$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())' 2> /dev/null) && PYOPT+=(-Dpybind11_DIR="$pbd")
fi
if [ ! -x /tmp/b/chunkinv ] || [ -n "${SCALE_REBUILD:-}" ]; then
  cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCHUNKINV_CUDA=ON \
    "${PYOPT[@]}" "${NET[@]}" > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
fi
cmake --build /tmp/b -j "$(nproc)" > /tmp/build.log 2>&1 || { grep -A5 -E "error|FAILED" /tmp/build.log | head -40; exit 1; }
B=/tmp/b/chunkinv
{ git log --oneline -1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } >> "$L" 2>&1
t built

# kernel vs emulated, every per-sample value compared by its bits (repr of the JSON number).
raw_compare() {
  python3 - "$1" "$2" <<'PY' | tee -a "$L"
import json, sys
r = json.load(open(sys.argv[1]))
by = {e['axes']['path']: e.get('per_sample', {}) for e in r['results'] if e['axes'].get('method') != 'exact'}
k, e = by['kernel'], by['emulated']
n = d = 0
for name, vals in k.items():
    other = e.get(name)
    if other is None or len(other) != len(vals):
        d += len(vals); n += len(vals); continue
    for a, b in zip(vals, other):
        n += 1; d += repr(a) != repr(b)
print(f"raw {sys.argv[2]}: kernel vs emulated: {d} of {n} per-sample values differ")
PY
}

if [ "$what" = raw ] || [ "$what" = both ]; then
  # seed : the family's gate setting (beside the issue's seed 4242 at the defaults)
  for sg in "4242:" "1:-a gate_scale=0.5" "2:-a gate_scale=4" "3:-a a_log=2" "4:-a a_log=-2 -a lower_bound=-1" \
            "5:-a gate_scale=2 -a dt_bias_spread=3"; do
    seed=${sg%%:*} extra=${sg#*:}
    for C in 16 32; do for m in flashkda_v1 flashkda_v2; do
      f=/tmp/raw-$seed-$C-$m.json
      # shellcheck disable=SC2086
      timeout 60 $B run -a family=kda -a chunk=$C -a method=$m $extra --samples 4000 --seed $seed \
        --paths gold,kernel,emulated --per-sample -q -o $f 2>> "$L" || echo "raw seed $seed C=$C $m: run failed" | tee -a "$L"
      [ -f $f ] && raw_compare $f "seed $seed C=$C $m ${extra:-defaults}, 4000 samples"
    done; done
  done
  t "raw done"
fi

if [ "$what" = pipeline ] || [ "$what" = both ]; then
  for C in ${chunks//,/ }; do for seed in ${SEEDS//,/ }; do
    for p in device host; do
      # A report an earlier call made (its tarball unpacked into the carried .ext/scale) is taken as it is.
      if [ -f ".ext/scale/$p-$C-$seed.json" ] && [ "$N" = 1000000 ]; then
        cp ".ext/scale/$p-$C-$seed.json" /tmp/ && echo "  $p C=$C seed $seed: from .ext/scale" >> "$L" && continue
      fi
      t0=$(date +%s%N)
      timeout 400 $B run -a family=model_like -a chunk=$C -a decay_floor=-2 --samples $N --seed $seed \
        --paths gold,kernel --quantiles sketch --pipeline $p -q -o /tmp/$p-$C-$seed.json 2>> "$L" ||
        echo "pipeline $p C=$C seed $seed: run failed (rc $?)" | tee -a "$L"
      echo "  $p C=$C seed $seed: $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> "$L"
    done
    $B check /tmp/device-$C-$seed.json --baseline /tmp/host-$C-$seed.json --exact --changes-only > /tmp/chk.txt 2>&1
    rc=$?
    t "pipeline C=$C seed $seed N=$N: device vs host check --exact rc=$rc: $(grep -m1 '^check:' /tmp/chk.txt)"
    [ $rc -eq 0 ] || head -20 /tmp/chk.txt >> "$L"
    # Every report so far comes back, so that a call cut short loses nothing already run.
    (cd /tmp && tar czf "$OUT/pipeline-reports.tgz" device-*-*.json host-*-*.json 2> /dev/null)
  done; done
fi
t done
