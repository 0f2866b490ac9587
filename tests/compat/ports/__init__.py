"""Qwen-Agent programs (its README, examples, docs and tests) with the imports renamed to chatagent's.

Each module holds one program as `main(server, resources)`: `server` is the URL of the loopback model,
`resources` the directory of the files it reads. `MODEL` lists the model's decisions in order (see
tests/support/protocol_server.py), `RULES` the server rules it needs ('keywords'; ('members', needle,
answer); ('contains', [texts], answer): that answer to a request holding all the texts), `SOURCE` where the program comes from, and `EXPECT` is 'pass', or why it is expected to fail.
The program is Qwen-Agent's own code with only the LLM config pointed at the loopback server, local files
instead of URLs, and tools that reach the internet replaced by local ones with the same shape.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

PORTS = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]))


def load(name: str):
    return importlib.import_module(f"{__name__}.{name}")


# chatagent's module -> Qwen-Agent's (the renaming, undone)
TO_QWEN = [
    ("from chatagent.schema import", "from qwen_agent.llm.schema import"),
    ("import chatagent.schema", "import qwen_agent.llm.schema"),
    ("from chatagent.gui import", "from qwen_agent.gui import"),
    ("chatagent", "qwen_agent"),
]


def as_qwen_agent(source: str) -> str:
    """A port's source with chatagent's imports renamed back to Qwen-Agent's."""
    for ours, theirs in TO_QWEN:
        source = source.replace(ours, theirs)
    return source
