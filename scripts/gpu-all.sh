#!/usr/bin/env bash
# One device call that runs the scripted GPU checks in order of priority, each under a time limit, so that a
# call cut short still returns what it finished (logs under $OUT; at most 8 files come back):
#   1. build (/tmp/b, kept on a warm machine)
#   t. every GPU test through ctest (Gpu*, DevicePipelineGpu*; the pipelines at 2*10^4 samples), then every
#      other test in parallel
#   2. kernel vs emulated on FlashKDA's raw inputs        (scripts/gpu-scale.sh raw)
#   3. the GPU recurrence: tests, sanitizers, bench, peer (scripts/gpu-seq.sh)
#   4. fla's chunk_kda and chunk_gated_delta_rule scored  (python/examples/score_fla.py, fla from .ext/fla)
#   5. the same with their backward, T = 4096              (score_fla.py --backward)
#   6. --pipeline device vs host at 10^6 samples          (scripts/gpu-scale.sh pipeline CHUNKS)
#
#   scripts/gpu-all.sh [STEPS] [CHUNKS]     STEPS: a comma list of tests,raw,seq,fla,flabwd,pipeline (default all)
set -uo pipefail
steps=",${1:-tests,raw,seq,fla,flabwd,pipeline},"
chunks="${2:-16,24,32,48,64}"
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi -L | tee -a "$OUT/scale.log"
bash scripts/gpu-scale.sh none > /dev/null 2>&1 || { tail -40 /tmp/build.log; exit 1; }   # the build only
if [[ $steps == *,tests,* ]]; then
  CHUNKINV_PIPELINE_SCALE_SAMPLES=${PIPELINE_SCALE_SAMPLES:-20000} CHUNKINV_PIPELINE_SCALE_SEEDS=1,2,3 \
    timeout "${TESTS_LIMIT:-240}" ctest --test-dir /tmp/b -V -R '^Gpu|^DevicePipelineGpu' --timeout 200 > /tmp/gputests.log 2>&1
  echo "gpu tests rc=$?" >> /tmp/gputests.log
  # every other test too (the GPU parts of DeviceMetrics, DeviceFamilies, DevicePipelineCli run here), in parallel
  timeout "${OTHER_TESTS_LIMIT:-240}" ctest --test-dir /tmp/b -j "$(nproc)" --output-on-failure \
    -E '^Gpu|^DevicePipelineGpu' --timeout 200 >> /tmp/gputests.log 2>&1
  echo "other tests rc=$?" >> /tmp/gputests.log
  gzip -c /tmp/gputests.log > "$OUT/gputests.log.gz"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|tests rc|\[  FAILED " /tmp/gputests.log | tee -a "$OUT/scale.log"
fi
if [[ $steps == *,raw,* ]]; then
  timeout "${RAW_LIMIT:-150}" bash scripts/gpu-scale.sh raw > /dev/null 2>&1
  grep -E "^raw" "$OUT/scale.log"
fi
if [[ $steps == *,seq,* ]]; then
  rm -rf /tmp/seqout
  timeout 300 env OUT=/tmp/seqout PEER_DIR=.ext/peers bash scripts/gpu-seq.sh > /dev/null 2>&1
  cp /tmp/seqout/gpu-seq.log "$OUT/" 2> /dev/null
  tar czf "$OUT/seq.tgz" -C /tmp seqout
  tail -12 "$OUT/gpu-seq.log"
fi
# fla's package imports einops in modules the scoring never calls: a stand-in where the machine has none
python3 -c 'import einops' 2> /dev/null || export PYTHONPATH="$PWD/.ext/shim${PYTHONPATH:+:$PYTHONPATH}"
score_fla() {  # name, timeout, options...
  local name=$1 limit=$2; shift 2
  rm -rf /tmp/$name
  timeout "$limit" python3 python/examples/score_fla.py --chunkinv /tmp/b/chunkinv --fla .ext --heads 2 \
    --out /tmp/$name "$@" > "$OUT/$name.log" 2>&1
  echo "score_fla $* rc=$?" | tee -a "$OUT/$name.log"
  if ls /tmp/$name/*-scored.json > /dev/null 2>&1; then
    /tmp/b/chunkinv table /tmp/$name/*-scored.json /tmp/$name/*-modelled.json --preset downstream --no-legend >> "$OUT/$name.log" 2>&1
    [[ " $* " == *" --backward "* ]] &&
      /tmp/b/chunkinv table /tmp/$name/*-scored.json /tmp/$name/*-modelled.json --preset backward --no-legend >> "$OUT/$name.log" 2>&1
  fi
  tar czf "$OUT/$name.tgz" --exclude='*.npz' -C /tmp $name "$OUT/$name.log" 2> /dev/null
  tail -4 "$OUT/$name.log"
}
# 4. forward at T = 1k, 8k, 64k; 5. the backward at T = 4k
[[ $steps == *,fla,* ]] && score_fla fla ${FLA_LIMIT:-280} --tokens "${FLA_TOKENS:-1024,8192,65536}"
[[ $steps == *,flabwd,* ]] && score_fla flabwd 280 --tokens 4096 --backward
if [[ $steps == *,pipeline,* ]]; then
  bash scripts/gpu-scale.sh pipeline "$chunks" 2>&1 | grep -E "pipeline|failed"
fi
