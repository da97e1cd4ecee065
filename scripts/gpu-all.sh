#!/usr/bin/env bash
# One device call that runs the scripted GPU checks in order of priority, each under a time limit, so that a
# call cut short still returns what it finished (logs under $OUT; at most 8 files come back):
#   1. build (/tmp/b, kept on a warm machine)
#   2. kernel vs emulated on FlashKDA's raw inputs        (scripts/gpu-scale.sh raw)
#   3. the GPU recurrence: tests, sanitizers, bench, peer (scripts/gpu-seq.sh)
#   4. fla's chunk_kda and chunk_gated_delta_rule scored  (python/examples/score_fla.py, fla from .ext/fla)
#   5. --pipeline device vs host at 10^6 samples          (scripts/gpu-scale.sh pipeline CHUNKS)
#
#   scripts/gpu-all.sh [STEPS] [CHUNKS]     STEPS: a comma list of raw,seq,fla,pipeline (default all four)
set -uo pipefail
steps=",${1:-raw,seq,fla,pipeline},"
chunks="${2:-16,24,32,48,64}"
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi -L | tee -a "$OUT/scale.log"
bash scripts/gpu-scale.sh none > /dev/null 2>&1 || { tail -40 /tmp/build.log; exit 1; }   # the build only
if [[ $steps == *,raw,* ]]; then
  bash scripts/gpu-scale.sh raw > /dev/null 2>&1
  grep -E "^raw" "$OUT/scale.log"
fi
if [[ $steps == *,seq,* ]]; then
  rm -rf /tmp/seqout
  timeout 300 env OUT=/tmp/seqout PEER_DIR=.ext/peers bash scripts/gpu-seq.sh > /dev/null 2>&1
  cp /tmp/seqout/gpu-seq.log "$OUT/" 2> /dev/null
  tar czf "$OUT/seq.tgz" -C /tmp seqout
  tail -12 "$OUT/gpu-seq.log"
fi
if [[ $steps == *,fla,* ]]; then
  rm -rf /tmp/fla-scores
  # fla's package imports einops in modules the scoring never calls: a stand-in where the machine has none
  python3 -c 'import einops' 2> /dev/null || export PYTHONPATH="$PWD/.ext/shim${PYTHONPATH:+:$PYTHONPATH}"
  timeout 240 python3 python/examples/score_fla.py --chunkinv /tmp/b/chunkinv --fla .ext/fla \
    --tokens "${FLA_TOKENS:-1024,8192,65536}" --out /tmp/fla-scores > "$OUT/fla.log" 2>&1
  echo "score_fla rc=$?" | tee -a "$OUT/fla.log"
  ls /tmp/fla-scores/*.json > /dev/null 2>&1 &&
    /tmp/b/chunkinv table /tmp/fla-scores/*-scored.json /tmp/fla-scores/*-modelled.json --preset downstream >> "$OUT/fla.log" 2>&1
  tar czf "$OUT/fla.tgz" -C /tmp fla-scores --exclude='*.npz' 2> /dev/null
  tail -5 "$OUT/fla.log"
fi
if [[ $steps == *,pipeline,* ]]; then
  bash scripts/gpu-scale.sh pipeline "$chunks" 2>&1 | grep -E "pipeline|failed"
fi
