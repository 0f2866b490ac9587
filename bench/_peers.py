"""The peer frameworks the benchmarks measure chatagent against, each pinned in its own offline venv.

    .venv/bin/python bench/_peers.py [name ...]      # make the venvs (once), print where they are

Each peer runs bench/_peer_run.py inside its venv with its adapter, bench/_peer_<name>.py (see there).
"""

from __future__ import annotations

import sys

from _venv import CACHE, ReferenceUnavailable, ReferenceVenv

PYDANTIC_AI = "2.68.0"
# langchain-core >= 1.7 needs a certifi newer than the index has: the newest LangChain on core 1.6
LANGCHAIN, LANGCHAIN_CORE, LANGCHAIN_OPENAI, LANGGRAPH = "1.4.7", "1.6.13", "1.7.2", "1.2.22"
OPENAI_AGENTS = "0.24.0"
SMOLAGENTS = "1.26.0"
CREWAI = "1.15.30"
MEM0 = "2.2.1"

PEERS = {
    "pydantic_ai": ReferenceVenv(
        "pydantic-ai", f"pydantic-ai {PYDANTIC_AI}", [f"pydantic-ai-slim[openai]=={PYDANTIC_AI}"], "import pydantic_ai"
    ),
    "langchain": ReferenceVenv(
        "langchain",
        f"LangChain {LANGCHAIN} create_agent (LangGraph {LANGGRAPH})",
        [
            f"langchain=={LANGCHAIN}",
            f"langchain-core=={LANGCHAIN_CORE}",
            f"langchain-openai=={LANGCHAIN_OPENAI}",
            f"langgraph=={LANGGRAPH}",
        ],
        "from langchain.agents import create_agent; import langchain_openai",
    ),
    "openai_agents": ReferenceVenv(
        "openai-agents", f"OpenAI Agents SDK {OPENAI_AGENTS}", [f"openai-agents=={OPENAI_AGENTS}"], "import agents"
    ),
    "smolagents": ReferenceVenv(
        "smolagents", f"smolagents {SMOLAGENTS}", [f"smolagents[openai]=={SMOLAGENTS}"], "import smolagents"
    ),
    "crewai": ReferenceVenv(
        "crewai",
        f"CrewAI {CREWAI}",
        [f"crewai=={CREWAI}"],
        "import crewai",
        env={"CREWAI_DISABLE_TELEMETRY": "true", "OTEL_SDK_DISABLED": "true", "CREWAI_TRACING_ENABLED": "false"},
    ),
}

# peers of one benchmark only (bench/memory.py), not agent frameworks: kept out of PEERS, which bench/peers.py runs
MEMORY_PEERS = {
    "mem0": ReferenceVenv(
        "mem0",
        f"mem0 {MEM0}",
        [f"mem0ai=={MEM0}"],
        "from mem0 import Memory",
        env={"MEM0_TELEMETRY": "False", "MEM0_DIR": str(CACHE / "mem0-home")},
    ),
    "crewai": PEERS["crewai"],
}


if __name__ == "__main__":
    for name in sys.argv[1:] or [*PEERS, "mem0"]:
        peer = PEERS.get(name) or MEMORY_PEERS[name]
        try:
            print(f"{peer.label}: {peer.ensure()}", flush=True)
        except ReferenceUnavailable as exc:
            print(f"{peer.label} reference missing: {exc}", flush=True)
