#!/usr/bin/env bash
# The whole test suite: lint and type check, then every test (end-to-end ones included).
set -euo pipefail
venv=${1:-.venv}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/basedpyright" -p . --pythonpath "$venv/bin/python"  # pyright's rules: pyproject.toml here (-p: never a pyrightconfig.json found in a parent directory)
"$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=15 "${@:2}"
