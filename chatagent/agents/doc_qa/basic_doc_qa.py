"""BasicDocQA (also DocQAAgent): answers a question about documents from their most relevant excerpts only.

    bot = BasicDocQA(llm=cfg)
    bot.run_nonstream([{'role': 'user', 'content': [{'text': 'What does table 1 show?'}, {'file': 'paper.pdf'}]}])

It is an Assistant (the same retrieval, citations and sources) told to answer strictly from the excerpts
and to say so when they do not hold the answer, rather than answer from what the model knows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.agents.assistant import Assistant
from chatagent.schema import Message, with_system_text

DEFAULT_NAME = "Basic DocQA"
DEFAULT_DESC = "Answers questions about the user's documents from their most relevant passages."
DOC_QA_PROMPT = {
    "en": "Answer the user's questions about their documents. Read the excerpts in their messages carefully and "
    "organise a clear answer from them alone; if they do not contain the answer, say so instead of guessing.",
    "zh": "请回答用户关于其文档的问题。仔细阅读用户消息中的文档摘录，只根据摘录组织出条理清晰的回答；如果摘录中没有答案，请直接说明，不要猜测。",
}


class BasicDocQA(Assistant):
    """An Assistant that answers only from the documents (see the module docstring)."""

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        system_message: str | None = None,
        name: str | None = DEFAULT_NAME,
        description: str | None = DEFAULT_DESC,
        files: list[str] | None = None,
        rag_cfg: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, system_message, name, description, files, rag_cfg, **kwargs)

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        messages = with_system_text(messages, DOC_QA_PROMPT.get(lang, DOC_QA_PROMPT["en"]))
        return (yield from super()._run(messages, lang=lang, **kwargs))


DocQAAgent = BasicDocQA  # Qwen-Agent's name for its default document QA agent

__all__ = ["BasicDocQA", "DocQAAgent"]
