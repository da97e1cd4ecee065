#!/usr/bin/env bash
# Regenerates results/: the article's three experiments (configs/k3_*.json)
# with its 3 samples and with 10^4 samples, on every path this machine
# offers, as JSON reports, the article's tables (Markdown and LaTeX) and a
# COMMANDS.md that lists every command run. Where there is a GPU the output
# goes to results/h200 (or $RESULTS_DIR), otherwise to results/cpu.
#
#   scripts/reproduce.sh [--large N] [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
LARGE=10000
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --large) LARGE="$2"; shift ;;
    --no-build) BUILD=0 ;;
    *) echo "reproduce.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$BUILD" = 1 ]; then . scripts/setup.sh; fi
BIN="./${BUILD_DIR:-build}/chunkinv"

if "$BIN" info --format json | grep -q '"kernel"' && "$BIN" run -a chunk=8 --samples 1 --paths kernel -q > /dev/null 2>&1; then
  DIR="${RESULTS_DIR:-results/h200}"
else
  DIR="${RESULTS_DIR:-results/cpu}"
fi
mkdir -p "$DIR"
LOG="$DIR/COMMANDS.md"
{
  echo "# Commands that made these files"
  echo
  echo "Made by \`scripts/reproduce.sh --large $LARGE\` on $(date -u +%Y-%m-%d), $(uname -m), $("$BIN" --version)."
  echo
} > "$LOG"
run() {  # run CMD...: runs it, records it
  echo "- \`$*\`" >> "$LOG"
  "$@"
}

declare -A PRESET=([k3_exponent_boundary]=k3-exponent [k3_high_power_stress]=k3-stress [k3_model_like]=k3-model)
for cfg in k3_exponent_boundary k3_high_power_stress k3_model_like; do
  for n in 3 "$LARGE"; do
    tag="$cfg-n$n"
    run "$BIN" run "configs/$cfg.json" --paths all --samples "$n" -q -o "$DIR/$tag.json" > /dev/null
    run "$BIN" table "$DIR/$tag.json" --preset "${PRESET[$cfg]}" --format md -o "$DIR/$tag.md"
    run "$BIN" table "$DIR/$tag.json" --preset "${PRESET[$cfg]}" --format latex -o "$DIR/$tag.tex"
  done
done
echo "results in $DIR" >&2
