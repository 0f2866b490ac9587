"""Qwen-Agent as the benchmarks' reference: its own virtualenv, made once, and bench/qa_*.py scripts run in it.

    .venv/bin/python bench/_qwen_agent.py            # create the venv if missing, print where it is

The venv (see bench/_venv.py) holds qwen-agent (pinned) with its [rag] extra, plus the packages its
`import qwen_agent.agents` needs but does not declare (numpy, soundfile, tqdm). The qa_*.py scripts run there
offline and print one JSON object as their last line. When the venv cannot be made, `reference()` says why, so
that a bench prints our figures and that reason instead of failing.
"""

from __future__ import annotations

import sys

from _venv import ReferenceUnavailable, ReferenceVenv, offline_env

QWEN_AGENT_VERSION = "0.0.34"
REQUIREMENTS = [f"qwen-agent[rag]=={QWEN_AGENT_VERSION}", "numpy", "soundfile", "tqdm"]
QWEN_AGENT = ReferenceVenv("qwen-agent", "Qwen-Agent", REQUIREMENTS, "import qwen_agent.agents")
QwenAgentUnavailable = ReferenceUnavailable

ensure_venv = QWEN_AGENT.ensure
python = QWEN_AGENT.python
run = QWEN_AGENT.run
reference = QWEN_AGENT.reference
__all__ = ["QwenAgentUnavailable", "ensure_venv", "offline_env", "python", "reference", "run"]


if __name__ == "__main__":
    try:
        print(f"Qwen-Agent {QWEN_AGENT_VERSION} reference venv: {ensure_venv()}")
    except ReferenceUnavailable as exc:
        sys.exit(f"Qwen-Agent reference missing: {exc}")
