"""BasicAgent: plain chat with the model, no tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.schema import Message


class BasicAgent(Agent):
    """Sends the conversation to the model and streams its answer."""

    async_safe = True
    fragment_native = True

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        yield from self._call_llm(messages)
