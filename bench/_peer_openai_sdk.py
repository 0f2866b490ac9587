"""The openai SDK alone, no framework (see bench/_peer_run.py): a reference of bench/first_run.py, in our venv (the
[dev] extra has the SDK: the tests' client of `chatagent serve`)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

import openai

IMPORT = "import openai"
QUESTION = [{"role": "user", "content": "Tell me a long story."}]


def version() -> str:
    return f"openai {metadata.version('openai')}"


def stream(url: str, model: str) -> Callable[[], str]:
    client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0)

    def run() -> str:
        chunks = client.chat.completions.create(model=model, messages=QUESTION, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    return run
