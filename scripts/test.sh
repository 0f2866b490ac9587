#!/usr/bin/env bash
# The whole test suite: lint and type check, then every test (end-to-end ones included).
set -euo pipefail
venv=${1:-.venv}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/basedpyright" --pythonpath "$venv/bin/python"  # pyright's rules; config in pyproject.toml
"$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=15 "${@:2}"
