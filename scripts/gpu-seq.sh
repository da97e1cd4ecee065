#!/usr/bin/env bash
# The GPU recurrence of issue 37 (item 6) on a GPU machine, in one device call of about 5 minutes (a 2-minute
# build on 16 cores, then each step under a time limit): its GPU tests (bit for bit against the CPU's
# Recurrence), the same under compute-sanitizer's memcheck and racecheck where it is installed, `chunkinv bench
# --recurrence` at the peer's shapes (B = 8 and 32, T = 2048, H = 16, K = V = 128, per-channel gates; then
# per-token gates and one launch for the whole sequence at B = 32), `seq --pipeline device` against the host's
# report (check --exact), and the peer a user would run instead
# (torch's FP64 recurrence, torch_recurrence_fp64.py from $PEER_DIR, default .ext/peers, a carried, ignored
# folder) in the same call; the ratio last. Everything is logged under $OUT (gpu-seq.log, the bench JSONs, the
# peer's output); the summary is the log's last lines. nettle-dev, where the machine lacks it, from .ext/nettle
# (Debian's package unpacked there), as scripts/gpu-fidelity.sh does.
set -uo pipefail
export PYTHONUNBUFFERED=1
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
OUT=${OUT:-/tmp/gpu-seq-out}; mkdir -p "$OUT"
L=$OUT/gpu-seq.log
PEER=${PEER_DIR:-.ext/peers}/torch_recurrence_fp64.py
source "$(dirname "$0")/carried-nettle.sh"  # NET: nettle-dev from .ext/nettle where missing
{ git log --oneline -1; nvidia-smi -L; } >> $L 2>&1
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCHUNKINV_CUDA=ON -DCHUNKINV_PYTHON=OFF "${NET[@]}" > $OUT/cfg.log 2>&1 || { tail -30 $OUT/cfg.log | tee -a $L; exit 1; }
cmake --build /tmp/b -j 16 --target chunkinv chunkinv_tests > $OUT/build.log 2>&1 || { grep -A5 -E "error|FAILED" $OUT/build.log | head -40 | tee -a $L; exit 1; }
t built | tee -a $L
T=/tmp/b/chunkinv_tests B=/tmp/b/chunkinv
FILTER='GpuRecurrence*:GpuChunkedForward*:ChunkedForwardStep*:Downstream.RecurrenceDots*:Downstream.ChunkedFp64*:Downstream.StrongForgets*:DownstreamCli.BenchRecurrence*:DownstreamCli.SeqPipelineDevice*'
# 1. the GPU forms (every recurrence kernel version, the chunked forward) against the CPU's, bit for bit
timeout 120 $T --gtest_filter="$FILTER" > $OUT/tests.log 2>&1; echo "tests rc=$? ($FILTER)" | tee -a $L
grep -E "^\[ *(OK|FAILED|SKIPPED) |Failure|differ|Expected|Which is" $OUT/tests.log | head -40 | tee -a $L
# 2. out-of-bounds accesses and shared-memory races (the staging's barriers)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  for tool in memcheck racecheck; do
    timeout 90 $CS --tool $tool --error-exitcode 9 $T --gtest_filter='GpuRecurrence.EqualsTheCpu*:GpuChunkedForward.Equals*' > $OUT/sanitizer-$tool.log 2>&1
    echo "compute-sanitizer $tool rc=$? ($(grep -cE "^========= (Invalid|Error|Race)" $OUT/sanitizer-$tool.log) findings)" | tee -a $L
  done
else
  echo "compute-sanitizer: not installed here" | tee -a $L
fi
t bench | tee -a $L
# 3. the benchmark at the peer's shapes, then per-token gates and the whole sequence in one launch
run_bench() {  # name, extra options
  local name=$1; shift
  timeout 120 $B bench --recurrence --threads 16 "$@" -o $OUT/bench-recurrence-$name.json > $OUT/bench-$name.txt 2>&1
  echo "bench $name ($*) rc=$?" | tee -a $L; cat $OUT/bench-$name.txt | tee -a $L
}
run_bench B8 --batch 8
run_bench B32 --batch 32
run_bench B32-token --batch 32 --gating token
run_bench B32-block2048 --batch 32 --block 2048
# version 2 (16 lanes a column pair), alternated with version 1
run_bench B32-v2 --batch 32 --kernel-version 2
run_bench B32-again --batch 32
# 4. seq with the GPU recurrence as its reference: the host's report, figure for figure
SEQ=(seq -a family=model_like -a seq_len=2048 -a chunk=64 -a dim=128 -a value_dim=128 -a gating=channel
     -a 'method=[neumann,fwdsub_fp32]' --samples 2 --threads 16 -q)
for p in host device; do
  s0=$SECONDS; timeout 120 $B "${SEQ[@]}" --pipeline $p -o $OUT/seq-$p.json > $OUT/seq-$p.txt 2>&1
  echo "seq --pipeline $p rc=$? in $(( SECONDS - s0 )) s" | tee -a $L
done
$B check $OUT/seq-device.json --baseline $OUT/seq-host.json --exact --changes-only > $OUT/seq-check.txt 2>&1; echo "seq device vs host: check --exact rc=$?" | tee -a $L
t peer | tee -a $L
# 5. the peer, in the same call
if [ -f "$PEER" ]; then
  timeout 150 python3 "$PEER" > $OUT/peer.txt 2>&1; echo "peer $PEER rc=$?" | tee -a $L; cat $OUT/peer.txt | tee -a $L
else
  echo "peer: $PEER not found (set PEER_DIR)" | tee -a $L
fi
t done | tee -a $L
# 6. the summary: ours against the peer at each B
python3 - "$OUT" <<'PY' | tee -a $L
import json, os, re, sys
out = sys.argv[1]
peer = {}
try:
    for line in open(os.path.join(out, "peer.txt")):
        m = re.search(r"B=(\d+) T=(\d+) H=(\d+).*?: ([0-9.e+-]+) token-heads/s", line)
        if m: peer[int(m.group(1))] = float(m.group(4))
except OSError:
    pass
print("summary (token-heads/s, FP64, K = V = 128, T = 2048, H = 16):")
for name in ("B8", "B32", "B32-token", "B32-block2048", "B32-v2", "B32-again"):
    try:
        r = json.load(open(os.path.join(out, f"bench-recurrence-{name}.json")))["recurrence"]
    except (OSError, ValueError, KeyError):
        print(f"  {name}: no report"); continue
    ours = r["token_heads_per_s"] or 0.0
    line = (f"  {name:14s} v{r.get('kernel_version', 1)} ours {ours:.3e} ({100 * (r['fraction_of_fp64_peak'] or 0):.1f}% of {r['fp64_peak_tflops'] or 0:.1f} TFLOP/s), "
            f"identical to the CPU: {r['identical_to_cpu']} ({r['o_values_checked']} o values, {len(r['checked_sequences'])} sequences), "
            f"{r['registers']} registers, {r['spill_bytes']} B local")
    if name in ("B8", "B32", "B32-v2") and r["batch"] in peer:
        line += f"; peer {peer[r['batch']]:.3e}, ratio {ours / peer[r['batch']]:.1f}x"
    print(line)
print("target: >= 1e8 token-heads/s at B = 32, identical_to_cpu true, tests and sanitizers rc=0")
PY
