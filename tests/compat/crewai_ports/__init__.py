"""CrewAI programs (the shapes of its docs, templates and tests) with `crewai` renamed to `chatagent.crewai`.

Each module holds one program as `main(server, workdir)`: `server` is the URL of the loopback model (the
protocol-speaking one of tests/support/protocol_server.py), `workdir` an empty directory the program may write
in (it is also the current directory). `MODEL` lists the model's decisions in order, `RULES` answers to requests
that hold given texts (`('contains', [texts], answer)`), for calls the two frameworks make in different numbers,
`SOURCE` where the program's shape comes from, and `EXPECT` is 'pass', or why it is expected to fail on
chatagent. `CREWAI = 'skip: ...'` says why it cannot run on CrewAI itself. The program is CrewAI code with only the
LLM pointed at the loopback server (and the embedder at its /embeddings).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

PORTS = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_"))


def load(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def as_crewai(source: str) -> str:
    """A port's source with chatagent's imports renamed back to CrewAI's."""
    return source.replace("chatagent.crewai", "crewai")
