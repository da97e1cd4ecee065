#!/usr/bin/env bash
# A device call without a build: binaries made on the development machine (the same compiler as the carried
# BEFORE build, so `bench` compares like with like), carried xz-compressed in .ext/run:
#   .ext/run/chunkinv.xz, .ext/run/chunkinv_tests.xz   this tree's CUDA build (build-cuda), stripped
#   .ext/bin/before/chunkinv, .ext/bin/lib/             the build `bench` compares against, and libfmt
#   .ext/run/chunkinv-prev.xz or .ext/run/prev-src.tar.gz  the roofline's "prev": a build, or a commit's tree to build here
# The tests' compiled-in paths (/work/main/...) are pointed at this copy of the tree.
#
#   scripts/gpu-carried.sh [STEPS]    STEPS: a comma list of the steps below
#                                     (default tests,recurrence,seq,backward,bench)
#     tests       the GPU tests and those of the device pipeline, the recurrence and seq (gtest filter; TESTS_FILTER
#                 sets another)
#     recurrence  bench --recurrence of the kernel versions in VERSIONS (default "1 2") at B in BATCHES
#                 (default "32 8"), alternated, twice; a version "prevN" is version N of the build carried
#                 as .ext/run/chunkinv-prev.xz (an earlier commit's, to compare in one call), "altN" of
#                 .ext/run/chunkinv-alt.xz (a variant under trial)
#     peer        torch's FP64 recurrence (.ext/peers/torch_recurrence_fp64.py), the recurrence's peer
#     compiled    the PyTorch peers of the pipeline (.ext/peers/torch_compiled.py, then torch_vectorized.py): their
#                 samples/s at C = 16, 32, 64, to set beside the roofline step's rates of the same call
#     seq         seq --pipeline host and device (the recurrence and the chunked forwards on the GPU): their
#                 wall times, and check --exact between their reports
#     backward    the same with the backward (backward=stored): the chunked backwards on the GPU; then
#                 bench --backward at C = 16 and 64
#     sass        the recurrence kernel's SASS (K = 128), gzipped
#     bench       `bench` of BEFORE and of this build, alternated, ROUNDS times (default 1)
#     pipeline    scripts/bench-pipeline.sh over this build (run's rates against both PyTorch peers, the memory
#                 check, bench --pipeline's roofline), at N16 N32 N64 samples (default 1e8 4e7 1.6e7) and
#                 MEMORY_SAMPLES (default 2e8); its JSON and texts tarred
#     instructions  Nsight Compute's warp instructions issued and duration of each launch of a `run --pipeline
#                 device` (gold + kernel, every metric, model_like d = 128, INSTR_SAMPLES samples, default 65536)
#                 at C = 16, 32, 64 (INSTR_CHUNKS): the instruction floor of each stage; CSVs tarred
#     roofline    bench --pipeline's roofline (every metric, then the peer's metrics, C = 16, 32, 64) of each
#                 build in ROOFLINE_BUILDS (default "prev now": .ext/run/chunkinv-prev.xz's, then this one's; "alt"
#                 .ext/run/chunkinv-alt.xz's), side by side in one call, the sets in ROOFLINE_SETS (default "every
#                 peer"); the texts and JSON tarred
#     profile     Nsight Compute (`--set full`) over the first PROFILE_COUNT (default 30) launches of a
#                 `run --pipeline device` (gold + kernel, every metric) at each C of PROFILE_CHUNKS (default
#                 "16 64"), PROFILE_SAMPLES samples (default 65536); each report's details page as text, tarred
set -uo pipefail
steps=",${1:-tests,recurrence,seq,backward,bench},"
OUT="${OUT:-$PWD/gpu-out}"; mkdir -p "$OUT"
mkdir -p build-cuda /work
for b in chunkinv chunkinv_tests chunkinv-prev chunkinv-alt; do
  [ -f ".ext/run/$b.xz" ] && xz -dc ".ext/run/$b.xz" > "build-cuda/$b" && chmod +x "build-cuda/$b"
done
[ -e /work/main ] || ln -s "$PWD" /work/main
# .ext/run/prev-src.tar.gz (`git archive` of an earlier commit), where no chunkinv-prev.xz is carried: built here
# (its chunkinv only, the same flags as build-cuda) into build-cuda/chunkinv-prev, for the roofline's "prev".
if [ -f .ext/run/prev-src.tar.gz ] && [ ! -f .ext/run/chunkinv-prev.xz ]; then
  source "$(dirname "$0")/carried-nettle.sh"  # NET: nettle-dev from .ext/nettle where missing
  rm -rf /tmp/prev-src && mkdir -p /tmp/prev-src && tar xzf .ext/run/prev-src.tar.gz -C /tmp/prev-src
  s0=$(date +%s)
  { cmake -S /tmp/prev-src -B /tmp/prev-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCHUNKINV_CUDA=ON -DCHUNKINV_PYTHON=OFF -DBUILD_TESTING=OFF "${NET[@]}" &&
    cmake --build /tmp/prev-build -j "$(nproc)" --target chunkinv; } > /tmp/prev-build.log 2>&1 &&
    cp /tmp/prev-build/chunkinv build-cuda/chunkinv-prev
  echo "prev from source: rc=$? $(( $(date +%s) - s0 )) s" | tee -a "$OUT/carried.log"
  tail -5 /tmp/prev-build.log | gzip > "$OUT/prev-build.log.gz"
fi
export LD_LIBRARY_PATH="$PWD/.ext/bin/lib:$PWD/.ext/nettle/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CHUNKINV_DATA="$PWD/data"
B=$PWD/build-cuda/chunkinv
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$B" --version | head -1; } | tee -a "$OUT/carried.log"
if [[ $steps == *,tests,* ]]; then
  CHUNKINV_PIPELINE_SCALE_SAMPLES=20000 CHUNKINV_PIPELINE_SCALE_SEEDS=1,2,3 timeout 240 build-cuda/chunkinv_tests \
    --gtest_filter="${TESTS_FILTER:-Gpu*:DevicePipeline*:Device*:Downstream*:Seq*:Backend*:ChunkedBackward*:ChunkedForward*}" \
    > /tmp/tests.log 2>&1
  echo "tests rc=$?" >> /tmp/tests.log
  gzip -c /tmp/tests.log > "$OUT/tests.log.gz"
  grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]|tests rc" /tmp/tests.log | tee -a "$OUT/carried.log"
fi
if [[ $steps == *,recurrence,* ]]; then
  for round in 1 2; do for v in ${VERSIONS:-1 2}; do for b in ${BATCHES:-32 8}; do
    bin=$B; [[ $v == prev* ]] && bin=$PWD/build-cuda/chunkinv-prev; [[ $v == alt* ]] && bin=$PWD/build-cuda/chunkinv-alt
    ver=${v#prev}; ver=${ver#alt}
    "$bin" bench --recurrence --batch $b --kernel-version "$ver" -o "/tmp/rec-v$v-B$b-$round.json" > /tmp/rec.txt 2>&1
    echo "recurrence v$v B=$b round $round rc=$? $(grep -E 'median|differ' /tmp/rec.txt | tr '\n' ' ')" | tee -a "$OUT/carried.log"
  done; done; done
  (cd /tmp && tar czf "$OUT/recurrence.tgz" rec-v*.json)
fi
if [[ $steps == *,peer,* ]]; then
  timeout 120 python3 .ext/peers/torch_recurrence_fp64.py 2>&1 | grep -E "token-heads|Error" | tee -a "$OUT/carried.log"
fi
if [[ $steps == *,compiled,* ]]; then
  for p in torch_compiled torch_vectorized; do
    timeout ${PEER_TIMEOUT:-240} python3 ".ext/peers/$p.py" > "/tmp/$p.log" 2>&1
    echo "$p rc=$?" | tee -a "$OUT/carried.log"
    grep -E "samples/s|Error" "/tmp/$p.log" | tee -a "$OUT/carried.log"
  done
fi
if [[ $steps == *,seq,* ]]; then
  SEQ=(seq -a family=model_like -a seq_len=4096 -a 'chunk=[16,64]' -a dim=128 -a value_dim=128 -a gating=channel
       -a 'method=[neumann,fla_solve_tril,blockwise]' -a storage=fla_chunk_kda --paths gold,kernel --samples 2 -q)
  for p in host device; do
    s0=$(date +%s%N); timeout 200 "$B" "${SEQ[@]}" --pipeline $p -o "/tmp/seq-$p.json"
    echo "seq --pipeline $p rc=$? $(( ($(date +%s%N) - s0) / 1000000 )) ms" | tee -a "$OUT/carried.log"
  done
  "$B" check /tmp/seq-device.json --baseline /tmp/seq-host.json --exact --changes-only 2>&1 | tail -1 | tee -a "$OUT/carried.log"
fi
if [[ $steps == *,backward,* ]]; then
  SEQ=(seq -a family=model_like -a seq_len=4096 -a chunk=64 -a dim=128 -a value_dim=128 -a gating=channel
       -a 'method=[neumann,fla_solve_tril]' -a storage=fla_chunk_kda -a backward=stored --paths gold,kernel --samples 1 -q)
  for p in host device; do
    s0=$(date +%s%N); timeout 240 "$B" "${SEQ[@]}" --pipeline $p -o "/tmp/bwd-$p.json"
    echo "seq backward --pipeline $p rc=$? $(( ($(date +%s%N) - s0) / 1000000 )) ms" | tee -a "$OUT/carried.log"
  done
  "$B" check /tmp/bwd-device.json --baseline /tmp/bwd-host.json --exact --changes-only 2>&1 | tail -1 | tee -a "$OUT/carried.log"
  for c in 16 64; do
    timeout 200 "$B" bench --backward --chunk $c -o "/tmp/bench-backward-C$c.json" 2>&1 | grep -E "differ|GPU" | tee -a "$OUT/carried.log"
  done
  (cd /tmp && tar czf "$OUT/bench-backward.tgz" bench-backward-*.json)
fi
if [[ $steps == *,sass,* ]]; then
  cuobjdump -sass "$B" | awk '/Function : /{p = ($0 ~ /recurrence_kernelILi8E/)} p' | gzip > "$OUT/recurrence-sass.txt.gz"
  echo "sass: $(zcat "$OUT/recurrence-sass.txt.gz" | wc -l) lines" | tee -a "$OUT/carried.log"
fi
if [[ $steps == *,bench,* ]]; then
  for round in $(seq 1 "${ROUNDS:-1}"); do for w in before now; do
    b=$PWD/.ext/bin/before/chunkinv; [ $w = now ] && b=$B
    s0=$(date +%s)
    timeout 150 "$b" bench -a family=model_like -a 'chunk=[16,32,64]' -a 'method=[neumann,flashkda_v2,fla_solve_tril]' \
      --paths kernel,cublas --samples 16384 -q -o "/tmp/bench-$w-$round.json"
    echo "bench $w round $round rc=$? $(( $(date +%s) - s0 )) s" | tee -a "$OUT/carried.log"
    (cd /tmp && tar czf "$OUT/bench.tgz" bench-*.json)
  done; done
fi
if [[ $steps == *,pipeline,* ]]; then
  MEMORY_SAMPLES=${MEMORY_SAMPLES:-200000000} PEER=.ext/peers/torch_vectorized.py \
    timeout ${PIPELINE_TIMEOUT:-420} scripts/bench-pipeline.sh build-cuda /tmp/pipeline ${N16:-100000000} ${N32:-40000000} ${N64:-16000000} \
    2>&1 | tee -a "$OUT/carried.log"
  cat /tmp/pipeline/roofline-*.txt >> "$OUT/carried.log"
  (cd /tmp/pipeline && tar czf "$OUT/pipeline.tgz" bench-pipeline.json roofline-* peer*.log time-*.txt)
fi
if [[ $steps == *,roofline,* ]]; then
  # ROOFLINE_CHUNKS: the chunks (default "16,32,64"); a build named twice runs twice (its second run's files -2).
  for w in ${ROOFLINE_BUILDS:-prev now}; do
    b=$B; [ "$w" = prev ] && b=$PWD/build-cuda/chunkinv-prev; [ "$w" = alt ] && b=$PWD/build-cuda/chunkinv-alt
    for c in ${ROOFLINE_SETS:-every peer}; do
      extra=(); [ $c = peer ] && extra=(--paths kernel --metrics inv_total_rel_rmse,inv_finite)
      f=/tmp/roofline-$w-$c; [ -e "$f.txt" ] && f=$f-2
      timeout 300 "$b" bench --pipeline -a "chunk=[${ROOFLINE_CHUNKS:-16,32,64}]" "${extra[@]}" -o "$f.json" > "$f.txt" 2>&1
      echo "roofline $w $c rc=$?" | tee -a "$OUT/carried.log"
      grep -E "validated|end to end|total|overlapped|metrics|gold  " "$f.txt" | tee -a "$OUT/carried.log"
    done
  done
  (cd /tmp && tar czf "$OUT/roofline.tgz" roofline-*.json roofline-*.txt)
fi
if [[ $steps == *,instructions,* ]]; then
  for c in ${INSTR_CHUNKS:-16 32 64}; do
    timeout 200 ncu --metrics smsp__inst_issued.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
      --csv --print-units base "$B" run -a family=model_like -a chunk="$c" -a dim=128 --samples "${INSTR_SAMPLES:-65536}" \
      --paths gold,kernel --quantiles sketch --pipeline device -q -o "/tmp/instr-run-C$c.json" > "/tmp/instr-C$c.csv" 2>&1
    echo "instructions C=$c rc=$? $(grep -c smsp__inst_issued "/tmp/instr-C$c.csv") launches" | tee -a "$OUT/carried.log"
  done
  (cd /tmp && tar czf "$OUT/instructions.tgz" instr-C*.csv)
fi
if [[ $steps == *,profile,* ]]; then
  # PROFILE_KERNELS: a regex of kernel names to profile (default every kernel); with it, the source page too
  # (each CUDA line's instructions executed and stall samples; the build's -lineinfo, the tree at /work/main).
  for c in ${PROFILE_CHUNKS:-16 64}; do
    timeout 300 ncu --set full --import-source yes ${PROFILE_KERNELS:+-k "regex:$PROFILE_KERNELS"} \
      --launch-count "${PROFILE_COUNT:-30}" -f -o "/tmp/profile-C$c" \
      "$B" run -a family=model_like -a chunk="$c" -a dim=128 --samples "${PROFILE_SAMPLES:-65536}" --paths gold,kernel \
      --quantiles sketch --pipeline device -q -o "/tmp/profile-run-C$c.json" > "/tmp/profile-C$c.log" 2>&1
    echo "profile C=$c rc=$?" | tee -a "$OUT/carried.log"
    ncu --import "/tmp/profile-C$c.ncu-rep" --page details --print-units base > "/tmp/profile-C$c.txt" 2>&1
    if [ -n "${PROFILE_KERNELS:-}" ]; then
      ncu --import "/tmp/profile-C$c.ncu-rep" --page source --print-source cuda --csv > "/tmp/profile-C$c-source.csv" 2>&1
      ncu --import "/tmp/profile-C$c.ncu-rep" --page source --print-source sass --csv > "/tmp/profile-C$c-sass.csv" 2>&1
      wc -l /tmp/profile-C$c-*.csv | tee -a "$OUT/carried.log"
    fi
    grep -E "^  [a-z_].*\(" "/tmp/profile-C$c.txt" | head -40 | tee -a "$OUT/carried.log"
  done
  (cd /tmp && tar czf "$OUT/profile.tgz" profile-C*.txt profile-C*.log profile-C*.csv 2>/dev/null)
fi
