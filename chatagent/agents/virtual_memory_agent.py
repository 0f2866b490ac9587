"""VirtualMemoryAgent: looks things up in the user's files when it needs to, keeping only the latest findings.

    bot = VirtualMemoryAgent(llm=cfg, files=['handbook.pdf'])
    bot.run_nonstream([{'role': 'user', 'content': 'What is the refund policy, and who approves refunds?'}])

The model has the `retrieval` tool (and any in `function_list`) and decides when to search. Each search's
excerpts go into the system message, *replacing* the previous search's, and the function message says only
that they are there: however many searches a long task needs, the context holds one set of excerpts, not all
of them. The files are `files=` and the file items of the user's messages (shown to the model by name).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.agents.assistant import _files_as_text
from chatagent.agents.file_excerpts import rag_settings
from chatagent.agents.fncall import CallHistory, FnCallAgent
from chatagent.schema import Message, with_system_text
from chatagent.tools.calling import ToolOutcome

DEFAULT_NAME = "Virtual Memory Agent"
DEFAULT_DESC = "Searches the user's files when it needs to, keeping only its latest findings in mind."
RETRIEVAL = "retrieval"
KNOWLEDGE = {
    "en": "# Excerpts from the user's files (your latest search)\n{knowledge}",
    "zh": "# 用户文件的摘录（你最近一次检索的结果）\n{knowledge}",
}
PUT_IN_SYSTEM = {
    "en": "The excerpts found are now in the system message (they replace those of earlier searches).",
    "zh": "检索到的摘录已放入系统消息（替换了之前检索的结果）。",
}
RAG_TOOL_KEYS = ("max_ref_token", "passwords", "store")  # what the retrieval tool reads from its cfg


class VirtualMemoryAgent(FnCallAgent):
    """A tool-calling agent whose file searches replace each other in its context (see the module docstring).

    Args:
        files: paths or URLs the user's questions are about.
        rag_cfg: `max_ref_token` (per search), `passwords`, `store` (see Memory).
        function_list, llm, system_message, name, description, ...: see FnCallAgent.
    """

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
        cfg = rag_settings(rag_cfg)
        retrieval = {"name": RETRIEVAL, **{k: cfg[k] for k in RAG_TOOL_KEYS if k in cfg}}
        super().__init__([retrieval, *(function_list or [])], llm, system_message, name, description, files, **kwargs)

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        lang = lang if lang in KNOWLEDGE else "en"
        functions = self.functions
        shown = _files_as_text(messages)  # the model sees the files' names; the tools read the files
        response: list[Message] = []
        history = CallHistory()
        knowledge = ""
        for _ in range(self.max_llm_calls):
            context = with_system_text(shown, KNOWLEDGE[lang].format(knowledge=knowledge)) if knowledge else shown
            reply = yield from self._call_llm(context + response, functions, start=len(response))
            response.extend(reply)
            calls = [m for m in reply if m.function_call is not None]
            if not calls:
                return
            outcomes = yield from self._run_calls(calls, history, messages + response, response, lang, kwargs)
            found = [o.content for o in outcomes if _is_search(o)]
            if found:
                knowledge = "\n\n".join(c if isinstance(c, str) else str(c) for c in found)
        yield from self._final_answer(shown, response, lang)

    def _shown_result(self, outcome: ToolOutcome, lang: str) -> str | list:
        return PUT_IN_SYSTEM.get(lang, PUT_IN_SYSTEM["en"]) if _is_search(outcome) else outcome.content


def _is_search(outcome: ToolOutcome) -> bool:
    return outcome.name == RETRIEVAL and outcome.error is None


__all__ = ["VirtualMemoryAgent"]
