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
#   py. the Python package's tests with torch CUDA tensors and the GPU paths (the module of the same build)
#   house. two builds compared: the fixed sweep of scripts/exact-sweep.sh --gpu with each, check --exact, then
#      `bench` and the device pipeline's rate with each, alternated, twice. The builds are binaries made
#      beforehand with the same compiler, carried: BEFORE and AFTER (default .ext/bin/{before,after}/chunkinv)
#
#   scripts/gpu-all.sh [STEPS] [CHUNKS]     STEPS: a comma list of tests,py,raw,seq,fla,flabwd,pipeline,house,bench
#                                           (default tests,seq: what has not run on a GPU yet, the chunked
#                                           forward and the recurrence's versions 3 and 4; without a build
#                                           there: scripts/gpu-carried.sh)
set -uo pipefail
steps=",${1:-tests,seq},"
chunks="${2:-16,24,32,48,64}"
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi -L | tee -a "$OUT/scale.log"
SCALE_PYTHON=AUTO bash scripts/gpu-scale.sh none > /dev/null 2>&1 || { tail -40 /tmp/build.log; exit 1; }   # the build only
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
if [[ $steps == *,py,* ]]; then
  { python3 -c 'import sys, torch; print(sys.executable, "torch", torch.__version__, "cuda", torch.cuda.is_available())'
    grep -E "chunkinv: .*Python|Python3" /tmp/cfg.log
    ls /tmp/b/python/chunkinv/ 2>&1 || { python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])'
      ls "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" /usr/include/python3*/Python.h
      python3 -c 'import pybind11; print(pybind11.get_cmake_dir())'; ls -d /usr/lib/cmake/pybind11 /usr/share/cmake/pybind11
      grep -i -E "python|pybind|dlpack" /tmp/b/CMakeCache.txt | head -20; }
    PYTHONPATH=/tmp/b/python CHUNKINV_BINARY=/tmp/b/chunkinv timeout "${PY_LIMIT:-200}" \
      python3 -m pytest -p no:cacheprovider -q -rs python/tests examples 2>&1
    echo "pytest rc=$?"; } > "$OUT/py.log" 2>&1
  grep -E "passed|failed|SKIPPED|rc=|torch" "$OUT/py.log"
fi
if [[ $steps == *,bench,* ]]; then steps="$steps,house,"; HOUSE_SWEEP=no; fi
if [[ $steps == *,house,* ]]; then
  export LD_LIBRARY_PATH="$PWD/.ext/bin/lib:$PWD/.ext/nettle/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  before="${BEFORE:-$PWD/.ext/bin/before/chunkinv}" after="${AFTER:-$PWD/.ext/bin/after/chunkinv}"
  export CHUNKINV_DATA="$PWD/data"
  H=/tmp/house; rm -rf $H; mkdir -p $H
  { echo "before: $("$before" --version 2>&1 | head -1)"; echo "after: $("$after" --version 2>&1 | head -1)"
    [ "${HOUSE_SWEEP:-yes}" = no ] || for w in before after; do
      s0=$(date +%s); bash scripts/exact-sweep.sh "${!w}" $H/$w --gpu > $H/$w.log 2>&1
      echo "sweep $w rc=$? $(( $(date +%s) - s0 )) s"; tail -1 $H/$w.log
    done
    [ "${HOUSE_SWEEP:-yes}" = no ] || bash scripts/exact-sweep.sh --compare "$after" $H/before $H/after; echo "compare rc=$?"; tar czf "$OUT/house.tgz" -C /tmp house
    for round in ${HOUSE_ROUNDS:-1 2}; do for w in before after; do
      "${!w}" bench -a family=model_like -a 'chunk=[16,32,64]' -a 'method=[neumann,flashkda_v2,fla_solve_tril]' \
        --paths kernel,cublas --samples 16384 -q -o $H/bench-$w-$round.json > /dev/null 2>&1; echo "bench $w $round rc=$?"
      tar czf "$OUT/house.tgz" -C /tmp house
      for cn in 16:60000000 32:20000000 64:6000000; do   # about 3 s each
        C=${cn%%:*} n=${cn#*:} t0=$(date +%s%N)
        "${!w}" run -a family=model_like -a chunk=$C -a dim=128 --samples $n --paths gold,kernel \
          --quantiles sketch --pipeline device -q -o $H/pipe-$w-$round-$C.json
        echo "pipeline $w round $round C=$C rc=$? $(( ($(date +%s%N) - t0) / 1000000 )) ms for $n samples"
      done
    done; done; } > "$OUT/house.log" 2>&1
  tar czf "$OUT/house.tgz" -C /tmp house
  grep -E "rc=|MOVED|SAME|pipeline" "$OUT/house.log" | head -60
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
