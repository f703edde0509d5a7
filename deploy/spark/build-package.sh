#!/usr/bin/env bash
# Builds what a Spark cluster needs from this checkout, into OUT (default ./dist):
#   radstack-<version>-py3-none-any.whl  the installable package (`pip wheel`): the radstack image,
#                                         Airflow workers and any host that runs `radctl`
#   radstack-py.zip                       the same Python packages for `spark-submit --py-files`
#                                         (batch.spark_submit.build_package), so executors import
#                                         radstack without installing it
# Usage: deploy/spark/build-package.sh [OUT]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "${1:-$repo/dist}" && cd "${1:-$repo/dist}" && pwd)"
python="${PYTHON:-python3}"
"$python" -m pip wheel --no-deps -q -w "$out" "$repo"
(cd "$repo" && "$python" -c 'import sys; from pathlib import Path; from batch.spark_submit import build_package; print(build_package(Path(sys.argv[1])))' "$out")
ls "$out"/radstack-*.whl
