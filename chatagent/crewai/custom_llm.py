"""A CrewAI custom model (a `BaseLLM` subclass whose `call(messages)` returns text) as a chatagent model: the
agent's loop offers it tools in the prompt (it has no native tool calling) and reads its calls from the text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.llm.base import BaseChatModel
from chatagent.llm.request import Usage
from chatagent.schema import ASSISTANT, Message, content_text
from chatagent.schema.fragment import Fragment


class CustomModel(BaseChatModel):
    """`llm.call(messages)` (messages as CrewAI gives them: [{'role', 'content'}]) as a backend."""

    model_type = "crewai_custom"
    native_tools = False

    def __init__(self, llm: Any) -> None:
        super().__init__({"model": str(getattr(llm, "model", "") or type(llm).__name__)})
        self.llm = llm

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        **kwargs: Any,
    ) -> Iterator[list[Fragment]]:
        asked = [{"role": m.role, "content": content_text(m.content)} for m in messages]
        answer = self.llm.call(asked)
        if not isinstance(answer, str):
            raise TypeError(
                f"{type(self.llm).__name__}.call must return the answer's text, got {type(answer).__name__}"
            )
        yield [Fragment.unchecked(ASSISTANT, answer, None, None, None, None, 0)]


__all__ = ["CustomModel"]
