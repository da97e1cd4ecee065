#!/usr/bin/env bash
# The end-to-end rate of `chunkinv run` on the GPU pipeline against the
# PyTorch peers a user would write instead (../shared/peers/torch_vectorized.py,
# eager, or PEER=path; torch_compiled.py, the same under torch.compile, or
# PEER_COMPILED=path), measured side by side in one call on one
# machine: model_like, d = 128, sketch statistics, C = 16, 32, 64, each in
# three ways: paths gold and kernel with every metric (rows c16, c32, c64);
# the kernel path alone with every metric (c16-kernel, ...); and the
# kernel path with the peer's own metrics, its error against the gold and
# whether it is finite (--metrics inv_total_rel_rmse,inv_finite: c16-peer,
# ...), the peer's work. Each run's wall time and peak resident memory
# come from /usr/bin/time; the rate is samples / wall time, start-up and the
# report's writing included. Beside it, from the run's CHUNKINV_TIMELINE
# marks: its start-up (to the first batch's buffers) and the rate of the
# computing alone, the span the peer's own figure covers. Then the memory
# check: 10^6 and MEMORY_SAMPLES (default 10^9) samples at C = 16, their
# peaks side by side. Last, the roofline: `chunkinv bench --pipeline` at
# C = 16, 32 and 64 for gold + kernel with every metric and for the peer's
# work (OUT_DIR/roofline-every.{json,txt}, roofline-peer.{json,txt}).
#
#   scripts/bench-pipeline.sh BUILD_DIR OUT_DIR [SAMPLES_C16 SAMPLES_C32 SAMPLES_C64]
#
# Writes OUT_DIR/bench-pipeline.json (one row per run and the peer's rates)
# and prints a table. Needs a GPU; the peer needs PyTorch (skipped without).
set -uo pipefail
B="${1:?build dir}"
OUT="${2:?out dir}"
N16="${3:-200000000}" N32="${4:-100000000}" N64="${5:-40000000}"
MEMORY_SAMPLES="${MEMORY_SAMPLES:-1000000000}"
PEER="${PEER:-$(dirname "$0")/../../shared/peers/torch_vectorized.py}"
PEER_COMPILED="${PEER_COMPILED:-$(dirname "$PEER")/torch_compiled.py}"
mkdir -p "$OUT"
ROWS="$OUT/bench-pipeline.rows"
: > "$ROWS"

# measure NAME SAMPLES CHUNK [PATHS [METRICS]]: one run, a JSON row of its figures.
measure() {
  local name="$1" n="$2" c="$3" paths="${4:-gold,kernel}" metrics="${5:-}" t="$OUT/time-$1.txt"
  CHUNKINV_TIMELINE=1 /usr/bin/time -f '%e %M' -o "$t" "$B/chunkinv" run -a family=model_like -a chunk="$c" -a dim=128 \
    --samples "$n" --paths "$paths" ${metrics:+--metrics "$metrics"} --quantiles sketch --pipeline device -q \
    -o "$OUT/run-$name.json" 2> "$OUT/timeline-$name.txt"
  local rc=$?
  read -r wall rss < "$t"
  python3 - "$name" "$n" "$c" "$wall" "$rss" "$rc" "$OUT/run-$name.json" "$paths" "$metrics" "$OUT/timeline-$name.txt" >> "$ROWS" <<'EOF'
import json, sys
name, n, c, wall, rss, rc, report, paths, metrics, timeline = sys.argv[1:]
row = {"name": name, "samples": int(n), "chunk": int(c), "paths": paths, "metrics": metrics or "every one",
       "wall_s": float(wall), "peak_rss_mib": int(rss) / 1024, "exit": int(rc), "samples_per_s": int(n) / float(wall)}
# The computing alone (CHUNKINV_TIMELINE): from the first batch's buffers to
# the last sketches back, the span the peer's own figure covers (it leaves
# out its start-up and a warm-up step).
marks = {}
for line in open(timeline):
    if line.startswith("timeline: "):
        label, t = line[10:].rsplit(" ", 1)
        marks.setdefault(label.strip(), float(t))  # the first of each (the pipeline's marks recur a part)
if "GPU pipeline: buffers and sketches ready" in marks and "run: computed" in marks and "main" in marks:
    span = marks["run: computed"] - marks["GPU pipeline: buffers and sketches ready"]
    row["computing_s"] = span
    row["start_up_s"] = marks["GPU pipeline: buffers and sketches ready"] - marks["main"]
    row["computing_samples_per_s"] = int(n) / span
try:
    meta = json.load(open(report))["meta"]
    row["pipeline"] = meta.get("pipeline")
except Exception as e:  # the row says why the report is missing
    row["report"] = str(e)
print(json.dumps(row))
EOF
}

PEER_METRICS=inv_total_rel_rmse,inv_finite
for c in 16 32 64; do
  n=$N16; [ "$c" = 32 ] && n=$N32; [ "$c" = 64 ] && n=$N64
  measure "c$c" "$n" "$c"
  measure "c$c-kernel" "$n" "$c" kernel
  measure "c$c-peer" "$n" "$c" kernel "$PEER_METRICS"
done
measure mem-1e6 1000000 16
measure mem-big "$MEMORY_SAMPLES" 16

for c in every peer; do
  extra=(); [ $c = peer ] && extra=(--paths kernel --metrics "$PEER_METRICS")
  "$B/chunkinv" bench --pipeline -a 'chunk=[16,32,64]' "${extra[@]}" -o "$OUT/roofline-$c.json" > "$OUT/roofline-$c.txt" 2>&1
  echo "roofline ($c) exit $?" >> "$OUT/roofline-$c.txt"
done

PEER_LOG="$OUT/peer.log" COMPILED_LOG="$OUT/peer-compiled.log"
for p in "$PEER:$PEER_LOG" "$PEER_COMPILED:$COMPILED_LOG"; do
  if python3 -c 'import torch' 2>/dev/null && [ -f "${p%%:*}" ]; then
    python3 "${p%%:*}" > "${p#*:}" 2>&1
  else
    echo "peer not run: no PyTorch or no ${p%%:*}" > "${p#*:}"
  fi
done

python3 - "$ROWS" "$PEER_LOG" "$OUT/bench-pipeline.json" "$COMPILED_LOG" <<'EOF'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def rates(log):
    out = {}
    for line in open(log):
        m = re.search(r"C=(\d+): ([0-9.e+]+) samples/s", line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out
peer, compiled = rates(sys.argv[2]), rates(sys.argv[4])
for r in rows:
    if r["name"].startswith("c") and r["chunk"] in peer:
        r["peer_samples_per_s"] = peer[r["chunk"]]
        r["ratio_to_peer"] = r["samples_per_s"] / peer[r["chunk"]]
        if "computing_samples_per_s" in r:
            r["computing_ratio_to_peer"] = r["computing_samples_per_s"] / peer[r["chunk"]]
    if r["name"].startswith("c") and r["chunk"] in compiled:
        r["compiled_samples_per_s"] = compiled[r["chunk"]]
        r["ratio_to_compiled"] = r["samples_per_s"] / compiled[r["chunk"]]
        if "computing_samples_per_s" in r:
            r["computing_ratio_to_compiled"] = r["computing_samples_per_s"] / compiled[r["chunk"]]
mem = {r["name"]: r for r in rows if r["name"].startswith("mem-")}
out = {"rows": rows, "peer": {str(k): v for k, v in peer.items()}, "peer_log": open(sys.argv[2]).read(),
       "compiled": {str(k): v for k, v in compiled.items()}, "compiled_log": open(sys.argv[4]).read()}
if "mem-1e6" in mem and "mem-big" in mem:
    out["memory_ratio"] = mem["mem-big"]["peak_rss_mib"] / mem["mem-1e6"]["peak_rss_mib"]
json.dump(out, open(sys.argv[3], "w"), indent=1)
print(f"{'run':11} {'C':>3} {'samples':>12} {'wall s':>8} {'samples/s':>11} {'peak MiB':>9} {'peer/s':>10} {'ratio':>6}"
      f" {'compiled/s':>10} {'ratio':>6} {'start s':>7} {'computing/s':>11} {'ratio':>6} {'compiled':>8}")
nan = float("nan")
for r in rows:
    print(f"{r['name']:11} {r['chunk']:3d} {r['samples']:12d} {r['wall_s']:8.2f} {r['samples_per_s']:11.3e} "
          f"{r['peak_rss_mib']:9.1f} {r.get('peer_samples_per_s', nan):10.3e} {r.get('ratio_to_peer', nan):6.2f}"
          f" {r.get('compiled_samples_per_s', nan):10.3e} {r.get('ratio_to_compiled', nan):6.2f}"
          f" {r.get('start_up_s', nan):7.3f} {r.get('computing_samples_per_s', nan):11.3e} {r.get('computing_ratio_to_peer', nan):6.2f}"
          f" {r.get('computing_ratio_to_compiled', nan):8.2f}"
          + ("" if r["exit"] == 0 else f"  exit {r['exit']}"))
if "memory_ratio" in out:
    print(f"peak memory, {mem['mem-big']['samples']:.0e} samples against 1e6: {out['memory_ratio']:.3f}")
EOF
