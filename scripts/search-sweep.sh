#!/usr/bin/env bash
# The searches of results/*/search.md: the random baseline (10^6 model_like
# samples at C = 16, d = 128, decay floor -5, every method below on the
# emulated path) and one `chunkinv search` per method and objective in the
# same space with the same budget and seed, so that their reached objectives
# compare. Reports, witnesses and a summary table go to OUTDIR.
#
#   scripts/search-sweep.sh BUILD_DIR OUTDIR [BUDGET] [PATH]
#
# PATH is the path the Neumann searches use (default emulated; `kernel` on a
# GPU gives the same bits faster). The other methods run on `emulated`, the
# path that has their forms.
#   BASELINE=0          skip the random baseline
#   SEARCHES="m/obj .." only these searches (default: every method below
#                       with both objectives)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:?usage: scripts/search-sweep.sh BUILD_DIR OUTDIR [BUDGET] [PATH]}"
out="${2:?usage: scripts/search-sweep.sh BUILD_DIR OUTDIR [BUDGET] [PATH]}"
budget="${3:-1000000}"
neumann_path="${4:-emulated}"
bin="$build/chunkinv"
mkdir -p "$out"
space=(-a chunk=16 -a dim=128 -a decay_floor=-5)
methods=(neumann fwdsub_fp32 fla_solve_tril blockwise)

t0=$(date +%s)
[ "${BASELINE:-1}" = 0 ] || "$bin" run -a family=model_like "${space[@]}" -a "method=[$(IFS=,; echo "${methods[*]}")]" \
  --paths gold,emulated --samples "${BASELINE_SAMPLES:-1000000}" --seed 0 -q -o "$out/baseline.json"
[ "${BASELINE:-1}" = 0 ] || echo "baseline: $(( $(date +%s) - t0 )) s" >&2

summary="$out/summary.txt"
[ -e "$summary" ] || printf '%-16s %-10s %-26s %10s %14s %10s %8s\n' method path objective evaluations best nonfinite seconds > "$summary"
for objective in inv_total_rel_rmse inv_method_only_rel_rmse; do
  for m in "${methods[@]}"; do
    case " ${SEARCHES:-$m/$objective} " in *" $m/$objective "*) ;; *) continue ;; esac
    path=emulated
    [ "$m" = neumann ] && path="$neumann_path"
    name="$m-$objective"
    t=$(date +%s)
    "$bin" search "${space[@]}" --path "$path" --method "$m" --objective "$objective" \
      --budget "$budget" --restarts 4 --seed 0 -q -o "$out/$name.json" --witness "$out/$name.safetensors"
    python3 - "$out/$name.json" "$m" "$path" "$objective" "$(( $(date +%s) - t ))" >> "$summary" << 'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
fmt = lambda v: f"{v:.6g}" if isinstance(v, float) else str(v)
print(f"{sys.argv[2]:<16} {sys.argv[3]:<10} {sys.argv[4]:<26} {r['evaluations']:>10} {fmt(r['best']):>14} "
      f"{str(r['nonfinite_at']):>10} {sys.argv[5]:>8}")
EOF
  done
done
cat "$summary"
