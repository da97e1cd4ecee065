#!/usr/bin/env bash
# The backward's figures (docs/downstream.md, "Backward") on the GPU machine, in order of priority, each
# under a time limit; everything logged to $OUT/backward.log as it goes, the reports copied to $OUT.
#   1. fla's chunk_kda and chunk_gated_delta_rule backward scored against the FP64 recurrence's gradient
#      (python/examples/score_fla.py --backward; fla from $FLA_DIR, default .ext/fla; torch must be there);
#      a gated backward fla refuses (Triton older than 3.7.1 on Hopper) is logged as skipped.
#   2. The CPU form of the backward on the machine's cores: the inverse's share of each gradient's error for
#      FP16 Neumann, FP32 substitution, fla_solve_tril and blockwise, stored vs recomputed A, at C = 16/32/64
#      on model_like and weak_decay_correlated (T = 4096) and Qwen3-Next's real gates (T = 1024).
# There is no GPU form of the backward yet: step 2 runs on the CPU.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/backward-out}
mkdir -p "$OUT"
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
L=$OUT/backward.log
source "$(dirname "$0")/carried-nettle.sh"  # NET: nettle-dev from .ext/nettle where missing
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCHUNKINV_CUDA=ON -DCHUNKINV_PYTHON=OFF "${NET[@]}" > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build /tmp/b -j 16 --target chunkinv > /tmp/build.log 2>&1 || { grep -A5 -E "error|FAILED" /tmp/build.log | head -40; exit 1; }
git log --oneline -1 >> "$L"; t built | tee -a "$L"
B=/tmp/b/chunkinv
M='method=[neumann,fwdsub_fp32,fla_solve_tril,blockwise]'

# 1. fla's backward, scored (and modelled with -a backward=stored beside it)
PYTHONPATH="${FLA_DIR:-.ext/fla}:${PYTHONPATH:-}" timeout 240 python3 python/examples/score_fla.py --chunkinv $B \
  --tokens 4096 --heads 2 --backward --out /tmp/fla-bwd 2>&1 | tee -a "$L"
if ls /tmp/fla-bwd/*-scored.json > /dev/null 2>&1; then
  $B table /tmp/fla-bwd/*-scored.json --preset backward --no-legend 2>&1 | tee -a "$L"
  tar czf "$OUT/fla-bwd.tar.gz" -C /tmp fla-bwd
fi
t "fla" | tee -a "$L"

# 2. the CPU form on every core
for F in model_like weak_decay_correlated; do
  timeout 200 $B seq -a family=$F -a seq_len=4096 -a 'chunk=[16,32,64]' -a dim=64 -a value_dim=64 -a "$M" \
    -a storage=fla_chunk_kda -a 'backward=[stored,recomputed]' --paths gold,emulated --samples 4 -q \
    -o "$OUT/seq-bwd-$F.json" 2>&1 | tee -a "$L"
  [ -f "$OUT/seq-bwd-$F.json" ] && $B table "$OUT/seq-bwd-$F.json" --preset backward --no-legend | tee -a "$L"
  t "$F" | tee -a "$L"
done
timeout 200 $B seq -a family=real_gates -a model=Qwen3-Next -a seq_len=1024 -a 'chunk=[16,32,64]' -a dim=64 \
  -a value_dim=64 -a "$M" -a storage=fla_chunk_gdn -a 'backward=[stored,recomputed]' --paths gold,emulated \
  --samples 4 -q -o "$OUT/seq-bwd-real_gates.json" 2>&1 | tee -a "$L"
[ -f "$OUT/seq-bwd-real_gates.json" ] && $B table "$OUT/seq-bwd-real_gates.json" --preset backward --no-legend | tee -a "$L"
t "real gates" | tee -a "$L"
