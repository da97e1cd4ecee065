#!/usr/bin/env bash
# A sweep as a Slurm job array: one `run --shard i/N` per array task, then
# one job, started when every task has succeeded, that merges the shards
# into the report of the whole run (docs/design.md, "Shards and merge").
#
#   scripts/slurm-array.sh N OUT.json [run arguments...]
#   scripts/slurm-array.sh 16 big.json configs/k3_model_like.json --samples 100000000 --paths emulated
#
# The shards go to OUT.json.shards/<i>.json, their logs beside them. Each
# shard saves as it goes (its .ckpt): a task that is requeued or resubmitted
# with `--resume` (RESUME=1) goes on where it stopped. Environment:
#   CHUNKINV=path/to/chunkinv     the binary (default: build/chunkinv)
#   SBATCH_ARGS="--time=4:00:00 --cpus-per-task=16 -p cpu"   passed to both sbatch calls
#   RESUME=1                      the tasks finish stopped shards (--resume)
# Inside an array task the script runs its shard (SLURM_ARRAY_TASK_ID, 1-based);
# with --merge it merges. Nothing here is needed by the tests.
set -euo pipefail

bin="${CHUNKINV:-build/chunkinv}"

if [ "${1:-}" = --task ]; then  # one array task: shard SLURM_ARRAY_TASK_ID of N
  n="$2" out="$3"
  shift 3
  i="${SLURM_ARRAY_TASK_ID:?not inside a Slurm array task}"
  resume=()
  [ "${RESUME:-0}" = 1 ] && [ -e "$out.shards/$i.json.ckpt" ] && resume=(--resume)
  exec "$bin" run "$@" --shard "$i/$n" --threads "${SLURM_CPUS_PER_TASK:-0}" -q -o "$out.shards/$i.json" "${resume[@]}"
fi

if [ "${1:-}" = --merge ]; then  # after every task: shards 1..N into OUT.json
  n="$2" out="$3"
  shards=()
  for ((i = 1; i <= n; i++)); do shards+=("$out.shards/$i.json"); done
  exec "$bin" merge "${shards[@]}" -o "$out"
fi

n="${1:?usage: scripts/slurm-array.sh N OUT.json [run arguments...]}"
out="${2:?usage: scripts/slurm-array.sh N OUT.json [run arguments...]}"
shift 2
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "slurm-array: N must be a whole number >= 1, not '$n'" >&2; exit 2; }
command -v sbatch > /dev/null || { echo "slurm-array: sbatch not found (run this on a Slurm login node)" >&2; exit 2; }
mkdir -p "$out.shards"
# Every option is checked once here, before anything is queued.
"$bin" run "$@" --shard "1/$n" --dry-run > /dev/null
self="$(realpath "$0")"
# shellcheck disable=SC2086  # SBATCH_ARGS holds several arguments
array=$(sbatch --parsable ${SBATCH_ARGS:-} --array="1-$n" --job-name=chunkinv-shard \
  --output="$out.shards/%a.log" "$self" --task "$n" "$out" "$@")
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_ARGS:-} --dependency="afterok:${array%%;*}" --job-name=chunkinv-merge \
  --output="$out.shards/merge.log" "$self" --merge "$n" "$out")
echo "submitted array ${array%%;*} ($n shards into $out.shards/) and merge job ${merge%%;*} (into $out)"
