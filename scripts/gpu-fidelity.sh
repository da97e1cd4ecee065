#!/usr/bin/env bash
# The fidelity checks of issue 42 on a GPU machine, in order of priority, each under a time limit (about
# 4 min after a 2-min build on an H200); everything logged to $OUT/final.log as it goes. fla (for
# scripts/fla-check.py) is read from $FLA_DIR (default .ext/fla, a carried, ignored folder); nettle-dev, where
# the machine lacks it, from .ext/nettle (Debian's package unpacked there).
set -uo pipefail
export PYTHONUNBUFFERED=1
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
L=$OUT/final.log
source "$(dirname "$0")/carried-nettle.sh"  # NET: nettle-dev from .ext/nettle where missing
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCHUNKINV_CUDA=ON -DCHUNKINV_PYTHON=OFF "${NET[@]}" > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build /tmp/b -j 16 > /tmp/build.log 2>&1 || { grep -A5 -E "error|FAILED" /tmp/build.log | head -40; exit 1; }
git log --oneline -1 >> $L; t built | tee -a $L
T=/tmp/b/chunkinv_tests B=/tmp/b/chunkinv
# 1. the SFU models on every input
timeout 70 $T --gtest_filter='GpuSfuModels.*' 2>&1 | grep -vE "^\[ RUN|^Running|^Note|^\[-|^\[=|^$" | head -60 | tee -a $L
t "raw inputs" | tee -a $L
# 2. kernel vs emulated on FlashKDA's raw inputs (the issue's runs)
for C in 16 32; do for m in flashkda_v1 flashkda_v2; do
  timeout 25 $B run -a family=kda -a chunk=$C -a method=$m --samples 4000 --seed 4242 --paths gold,kernel,emulated --per-sample -q -o /tmp/raw-$C-$m.json
  python3 - /tmp/raw-$C-$m.json <<'PY' | tee -a $L
import json, sys
r = json.load(open(sys.argv[1]))
by = {e['axes']['path']: e.get('per_sample', {}) for e in r['results'] if e['axes'].get('method') != 'exact'}
k, e = by['kernel'], by['emulated']
n = d = 0
for name, vals in k.items():
    for a, b in zip(vals, e.get(name, [])):
        n += 1; d += repr(a) != repr(b)
print(f"{sys.argv[1]}: kernel vs emulated, seed 4242, 4000 samples: {d} of {n} per-sample values differ")
PY
done; done
t "mma floor" | tee -a $L
# 3. the FP16 mma's alignment floor, the three instructions, the pipelines where they parted
timeout 30 $T --gtest_filter='GpuInstructions.MmaF16*' 2>&1 | grep -E "alignment|designed|differ|OK \]|FAILED" | tee -a $L
CHUNKINV_REPLAY_CHUNK=24 CHUNKINV_REPLAY_SAMPLES=195447 timeout 15 $T --gtest_filter='GpuNeumannReplay.*' 2>&1 | grep -E "Neumann replay" | tee -a $L
CHUNKINV_REPLAY_CHUNK=64 CHUNKINV_REPLAY_SAMPLES=84687,92038 timeout 15 $T --gtest_filter='GpuNeumannReplay.*' 2>&1 | grep -E "Neumann replay" | tee -a $L
for cn in 24:300000 64:100000; do
  C=${cn%:*} N=${cn#*:}
  for p in device host; do timeout 45 $B run -a family=model_like -a chunk=$C -a decay_floor=-2 --samples $N --seed 31337 --paths gold,kernel --quantiles sketch --pipeline $p -q -o /tmp/$p-$C.json; done
  $B check /tmp/device-$C.json --baseline /tmp/host-$C.json --exact --changes-only > /tmp/chk-$C.txt 2>&1; echo "C=$C N=$N seed 31337: device vs host check --exact rc=$? ($(grep -c '^| model' /tmp/chk-$C.txt) figures apart)" | tee -a $L
done
t "gpu forms" | tee -a $L
timeout 40 $T --gtest_filter='GpuKernelPath.GpuInverseForms*:GpuInverseForms.*' 2>&1 | grep -E "^\[ *(OK|FAILED) |fla_solve_tril" | head -30 | tee -a $L
t "fla" | tee -a $L
timeout 70 python3 scripts/fla-check.py --binary $B --fla "${FLA_DIR:-.ext/fla}" --out /tmp/flacheck --count 512 2>&1 | grep -v '^\[{' | grep -v '^wrote' | tee -a $L
t done | tee -a $L
