#!/usr/bin/env bash
# The Python package in CI (called at the end of scripts/test.sh): installs
# what it needs from Debian (no PyPI: NumPy, pandas, pytest, pybind11 and
# setuptools are Debian's, for /usr/bin/python3), installs the package into a
# venv that sees them (build/pyvenv, --system-site-packages) with
#   pip install --no-build-isolation --no-index .
# and runs its tests and the examples against the binary of $BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BUILD_DIR="${BUILD_DIR:-build}"

need=()
$PY -c 'import numpy' 2> /dev/null || need+=(python3-numpy)
$PY -c 'import pandas' 2> /dev/null || need+=(python3-pandas)
$PY -c 'import pytest' 2> /dev/null || need+=(python3-pytest)
$PY -c 'import pybind11' 2> /dev/null || need+=(python3-pybind11 pybind11-dev)
$PY -c 'import setuptools, wheel' 2> /dev/null || need+=(python3-setuptools python3-wheel)
$PY -c 'import ensurepip' 2> /dev/null || need+=(python3-venv)
pyinc=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2> /dev/null || echo /nonexistent)
[ -e "$pyinc/Python.h" ] || need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "python-setup: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" > /dev/null
fi

VENV="$BUILD_DIR/pyvenv"
[ -x "$VENV/bin/python" ] || $PY -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install -q --no-build-isolation --no-index --no-deps . > "$BUILD_DIR.python.log" 2>&1 ||
  { tail -40 "$BUILD_DIR.python.log" >&2; echo "python-setup: pip install failed, see $BUILD_DIR.python.log" >&2; exit 1; }

case "$BUILD_DIR" in
  /*) export CHUNKINV_BINARY="$BUILD_DIR/chunkinv" ;;
  *) export CHUNKINV_BINARY="$PWD/$BUILD_DIR/chunkinv" ;;
esac
rc=0
"$VENV/bin/python" -m pytest -p no:cacheprovider -q python/tests examples || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "python-setup: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
