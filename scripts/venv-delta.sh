#!/usr/bin/env bash
# The Spark 4.2 line with Delta Lake: .venv-delta (or $1), the package with its delta and test
# extras (pip resolves pyspark 4.2.x, which delta-spark 4.4 requires) and deltalake (delta-rs),
# the tests' independent reader. `make test-delta` calls it when the environment is missing.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${1:-.venv-delta}
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "slipstream needs Python 3.11+"'
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[delta,test]' 'deltalake>=1.0'
"$VENV/bin/python" -c 'import pyspark, delta; print("pyspark", pyspark.__version__, "delta-spark ready")'
touch "$VENV/.installed"
