#!/usr/bin/env bash
# A fixed sweep for "nothing moved": every family and every method at three
# chunk sizes, reports written into DIR, one per family; run it with the
# build before a change and with the build after, then compare the two
# folders with --compare (check --exact on every report; exit 1 when any
# statistic of any report moved).
#
#   scripts/exact-sweep.sh BINARY DIR [--gpu]    # --gpu: also kernel, cublas and both pipelines
#   scripts/exact-sweep.sh --compare BINARY BEFORE AFTER
#
# CPU: gold and emulated, 200 samples a configuration (a few minutes on 2
# cores). GPU: the kernel and cublas paths on their methods, and the device
# pipeline against the host loop, sketch quantiles.
set -euo pipefail

if [ "${1:-}" = --compare ]; then
  bin=$2 before=$3 after=$4 rc=0
  for f in "$before"/*.json; do
    n=$(basename "$f")
    if [ ! -f "$after/$n" ]; then echo "exact-sweep: $n missing from $after"; rc=1; continue; fi
    if "$bin" check "$after/$n" --baseline "$f" --exact --changes-only > "$after/$n.check" 2>&1; then
      echo "exact-sweep: $n SAME"
    else
      echo "exact-sweep: $n MOVED ($after/$n.check)"; rc=1
    fi
  done
  exit $rc
fi

bin=$1 dir=$2 gpu=${3:-}
mkdir -p "$dir"
methods='method=[neumann,flashkda_v2,fwdsub_fp32,fla_solve_tril,blockwise,neumann_series,doubling,paterson_stockmeyer,horner,block_nested,residual_neumann]'
chunks='chunk=[16,33,64]'
common=(--samples 200 --seed 20261203 -q)
run() {  # name, then run's arguments
  local name=$1; shift
  "$bin" run "$@" "${common[@]}" -o "$dir/$name.json"
}
run floor -a family=floor -a "$chunks" -a "$methods" --paths gold,emulated
run floor-channel -a family=floor -a gating=channel -a "$chunks" -a "$methods" --paths gold,emulated
run model_like -a family=model_like -a "$chunks" -a "$methods" --paths gold,emulated
run weak_decay_correlated -a family=weak_decay_correlated -a "$chunks" -a "$methods" --paths gold,emulated
run real_gates -a family=real_gates -a "$chunks" -a "$methods" --paths gold,emulated
run kda -a family=kda -a "chunk=[16,32]" -a 'method=[flashkda_v1,flashkda_v2,fwdsub_fp32]' --paths gold,emulated
run collinear -a family=collinear -a "chunk=[16,32]" -a 'method=[flashkda_v1,flashkda_v2]' --paths gold,emulated
# seq: the downstream forward and backward per sequence (docs/downstream.md), every gating, storage and backward
# form, per-sample values, and two shards merged
seq_common=(-a seq_len=256 -a dim=32 -a value_dim=32 -a 'method=[neumann,fla_solve_tril,blockwise]' --samples 3
            --seed 20261203 -q)
"$bin" seq -a family=model_like -a 'chunk=[16,32]' -a storage=fla_chunk_kda -a 'backward=[none,stored,recomputed]' \
  --paths gold,emulated --per-sample "${seq_common[@]}" -o "$dir/seq-model_like.json"
"$bin" seq -a family=real_gates -a 'chunk=[16,64]' -a storage=fla_chunk_gdn -a backward=stored -a window=64 \
  --paths gold,emulated "${seq_common[@]}" -o "$dir/seq-real_gates.json"
"$bin" seq -a family=sparse_forget -a gating=channel -a 'chunk=[16,32]' -a 'storage=[flashkda,fp64]' \
  -a initial_state=random --paths gold,emulated "${seq_common[@]}" -o "$dir/seq-channel.json"
for i in 1 2; do
  "$bin" seq -a family=weak_decay_correlated -a chunk=16 -a storage=fp64 -a backward=stored --paths gold,emulated \
    --per-sample --shard $i/2 "${seq_common[@]}" -o "$dir/seq-shard-$i.part"
done
"$bin" merge "$dir"/seq-shard-1.part "$dir"/seq-shard-2.part -q -o "$dir/seq-merged.json"
rm -f "$dir"/seq-shard-*.part
if [ "$gpu" = --gpu ]; then
  "$bin" seq -a family=model_like -a 'chunk=[16,64]' -a dim=64 -a value_dim=64 -a seq_len=512 -a storage=fla_chunk_kda \
    -a backward=stored -a 'method=[neumann,fla_solve_tril]' --paths gold,kernel --pipeline device --samples 2 \
    --seed 20261203 -q -o "$dir/seq-device.json"
fi
if [ "$gpu" = --gpu ]; then
  gm='method=[neumann,flashkda_v2,fla_solve_tril,blockwise,residual_neumann]'
  run gpu-kernel -a family=model_like -a "$chunks" -a "$gm" --paths gold,kernel
  run gpu-kernel-raw -a family=kda -a "chunk=[16,32]" -a 'method=[flashkda_v1,flashkda_v2]' --paths gold,kernel
  run gpu-cublas -a family=model_like -a "chunk=[16,32]" --paths gold,cublas
  for p in host device; do
    "$bin" run -a 'family=[model_like,floor]' -a "$chunks" --paths gold,kernel --quantiles sketch --pipeline $p \
      --samples 20000 --seed 20261203 -q -o "$dir/pipeline-$p.json"
  done
fi
echo "exact-sweep: $(ls "$dir"/*.json | wc -l) reports in $dir"
