#!/usr/bin/env bash
# The Python package in CI (scripts/test.sh runs it after ctest): installs
# what it needs from Debian (no PyPI: NumPy, pandas, pytest, pybind11,
# DLPack's header and setuptools are Debian's, for /usr/bin/python3), and
# runs the package's tests and the examples on the module that the project's
# build made ($BUILD_DIR/python, the same chunkinv_lib as the binary: nothing
# is compiled here) against the binary of $BUILD_DIR.
#   --deps   only installs the Debian packages, matplotlib included (for
#            scripts/plot.py and its ctest tests, PlotScript.*), then exits;
#            scripts/test.sh runs this before it configures the build
#   --pip    installs the package the way users do instead, into a venv that
#            sees Debian's packages ($BUILD_DIR/pyvenv, --system-site-packages)
#            with `pip install --no-build-isolation --no-index .`, which
#            compiles the library a second time (minutes), and tests that
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BUILD_DIR="${BUILD_DIR:-build}"
say() { printf 'python-setup: %s\n' "$*" >&2; }

need=()
command -v $PY > /dev/null || need+=(python3)
$PY -c 'import numpy' 2> /dev/null || need+=(python3-numpy)
$PY -c 'import pandas' 2> /dev/null || need+=(python3-pandas)
$PY -c 'import matplotlib' 2> /dev/null || need+=(python3-matplotlib)
$PY -c 'import pytest' 2> /dev/null || need+=(python3-pytest)
$PY -c 'import pybind11' 2> /dev/null || need+=(python3-pybind11 pybind11-dev)
$PY -c 'import setuptools, wheel' 2> /dev/null || need+=(python3-setuptools python3-wheel)
$PY -c 'import ensurepip' 2> /dev/null || need+=(python3-venv)
[ -e /usr/include/dlpack/dlpack.h ] || need+=(libdlpack-dev)
pyinc=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2> /dev/null || echo /nonexistent)
[ -e "$pyinc/Python.h" ] || need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  command -v apt-get > /dev/null || { say "missing ${need[*]}; install them with your package manager"; exit 1; }
  say "installing ${need[*]} with apt-get"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" > /dev/null
  $PY -c 'import numpy, pandas, matplotlib, pytest, pybind11, setuptools, wheel, ensurepip' ||
    { say "/usr/bin/python3 still lacks a module after installing ${need[*]}"; exit 1; }
fi
[ "${1:-}" = --deps ] && exit 0

case "$BUILD_DIR" in
  /*) build="$BUILD_DIR" ;;
  *) build="$PWD/$BUILD_DIR" ;;
esac
export CHUNKINV_BINARY="$build/chunkinv"
python=$PY
if [ "${1:-}" = --pip ]; then
  say "installing the package into $BUILD_DIR/pyvenv with pip (it compiles the library again; log $BUILD_DIR.python.log)"
  VENV="$BUILD_DIR/pyvenv"
  [ -x "$VENV/bin/python" ] || $PY -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -m pip install -q --no-build-isolation --no-index --no-deps . > "$BUILD_DIR.python.log" 2>&1 ||
    { tail -40 "$BUILD_DIR.python.log" >&2; say "pip install failed, see $BUILD_DIR.python.log"; exit 1; }
  python="$VENV/bin/python"
  # Run from elsewhere, so that the installed package is the one imported.
  cd "$build"
  tests=("$OLDPWD/python/tests" "$OLDPWD/examples")
else
  ls "$build"/python/chunkinv/_core*.so > /dev/null 2>&1 ||
    { say "no Python module in $BUILD_DIR/python: configure needs python3-dev, pybind11-dev and libdlpack-dev (scripts/python-setup.sh --deps), then build"; exit 1; }
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
  tests=(python/tests examples)
fi
say "pytest ${tests[*]} with $python against $CHUNKINV_BINARY"
rc=0
"$python" -m pytest -p no:cacheprovider -q -rs "${tests[@]}" || rc=$?
if [ "$rc" -eq 5 ]; then
  say "pytest collected no tests"
  exit 1
fi
exit "$rc"
