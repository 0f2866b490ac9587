"""ParallelDocQA: reads every part of long documents, all parts at once, then answers from what they said.

    bot = ParallelDocQA(llm=cfg)
    bot.run_nonstream([{'role': 'user', 'content': [{'text': 'Which experiments were run?'}, {'file': 'thesis.pdf'}]}])

Retrieval alone can miss an answer spread over a long document. Here the documents are cut into parts of
about PART_TOKENS tokens, and one model call per part (a *member*, up to `max_workers` at a time, each on
its own thread, each stream read to its end) answers the question from that part only, or says the part
does not hold the answer. The members' answers, with the question, then pick the best excerpts of the
documents (within MAX_REF_TOKENS), and a last call, the one that is streamed, writes the answer from them.
The answer's last fragment carries `extra['sources']` (`Chunk.as_source`: file, pages, snippet) and
`extra['parts_answered']` (how many parts held something). A conversation without files is answered as
by an Assistant.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from chatagent.agent import Agent, RunContext, current_run
from chatagent.agents.assistant import Assistant
from chatagent.rag.file_index import FileIndex
from chatagent.schema import ASSISTANT, SYSTEM, USER, Message, content_text
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect
from chatagent.tools.arguments import ToolArgumentError, parse_json
from chatagent.tools.calling import run_batch
from chatagent.tools.retrieval import allowed_files

if TYPE_CHECKING:
    from chatagent.llm.base import Usage

logger = logging.getLogger("chatagent.agent")

DEFAULT_NAME = "Parallel DocQA"
DEFAULT_DESC = "Reads every part of long documents in parallel, then answers from the relevant passages."
PART_TOKENS = 1000  # each member reads about this much
MAX_REF_TOKENS = 4500  # excerpts for the final answer
NO_ANSWER = "<None>"

MEMBER_PROMPT = {
    "en": """You answer questions from one excerpt of a document. Decide whether the excerpt holds the answer; \
do not force one. If it does, answer from the excerpt alone, quoting it where you can, briefly, in the language of \
the document. Reply with JSON only:
{{"res": "ans", "content": "your answer"}} when the excerpt answers the question,
{{"res": "none", "content": "{none}"}} when it does not.

# Excerpt
{part}

# Question
{question}""",
    "zh": """你根据文档的一个片段回答问题。先判断片段是否包含答案，不要强行回答。如果包含，只依据片段作答，尽量引用原文，\
简洁，使用文档的语言。只回复 JSON：
片段能回答问题时：{{"res": "ans", "content": "你的答案"}}
片段不能回答问题时：{{"res": "none", "content": "{none}"}}

# 片段
{part}

# 问题
{question}""",
}
SUMMARY_PROMPT = {
    "en": """Answer the user's question from the knowledge below: excerpts of their documents, each headed by \
its source as [file, p. N], and what readers of each part of the documents found. Answer strictly from it, even \
where it differs from what you know; if only a few sentences are relevant, answer from those. Cite sources as \
[file, p. N].

# Knowledge
{knowledge}""",
    "zh": """请根据下面的知识回答用户的问题：知识包括用户文档的摘录（每段开头用 [文件, p. 页码] 标明出处）以及对文档各部分的\
阅读结果。回答必须严格依据这些知识，即使与你已知的不同；如果只有少数几句相关，请据此回答。引用时使用 [文件, p. 页码] 的格式。

# 知识
{knowledge}""",
}
FOUND_BY_READERS = {"en": "## What the readers found\n{answers}", "zh": "## 阅读结果\n{answers}"}
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$")


class ParallelDocQAMember(Agent):
    """One reader: answers the question from one part of the documents, as JSON (see MEMBER_PROMPT)."""

    fragment_native = True  # _run yields fragments and requests

    def _run(
        self, messages: list[Message], lang: str = "en", part: str = "", question: str = "", **kwargs: Any
    ) -> Iterator[list[Message]]:
        prompt = MEMBER_PROMPT[lang].format(none=NO_ANSWER, part=part, question=question)
        return (yield from self._call_llm([Message.unchecked(USER, prompt)]))


class ParallelDocQA(Assistant):
    """Reads every part of the documents at once, then answers (see the module docstring).

    Args:
        max_workers: members asked at the same time (default 8).
        function_list, llm, system_message, name, description, files, rag_cfg: see Assistant.
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
        max_workers: int = 8,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, system_message, name, description, files, rag_cfg, **kwargs)
        if not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}")
        self.max_workers = max_workers

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        lang = lang if lang in MEMBER_PROMPT else "en"
        files = allowed_files(self.files, messages)
        if not files:
            return (yield from super()._run(messages, lang=lang, **kwargs))
        question = next((m.text for m in reversed(messages) if m.role == USER), "")
        index, errors = yield from self._blocking(self._load, files)
        ctx = current_run()
        ctx.check_deadline()
        answers = yield from self._blocking(self._ask_members, parts(index, PART_TOKENS), question, lang, ctx)
        found = index.select("\n\n".join([question, *answers]), MAX_REF_TOKENS)
        knowledge = found.as_text()
        if answers:
            knowledge += "\n\n" + FOUND_BY_READERS[lang].format(answers="\n\n".join(f"- {a}" for a in answers))
        if errors:
            knowledge += "\n\n" + "\n".join(f"- {e}" for e in errors)
        system = SUMMARY_PROMPT[lang].format(knowledge=knowledge)
        rest = [m for m in messages if m.role != SYSTEM]
        own = [content_text(m.content) for m in messages if m.role == SYSTEM]
        summary = [Message.unchecked(SYSTEM, "\n\n".join([*own, system]))] + rest
        reply = yield from self._call_llm(summary)
        extra = {
            "sources": [c.as_source() for c in found.chunks],
            "parts_answered": len(answers),
        }
        yield [Fragment.unchecked(ASSISTANT, "", None, None, None, extra, max(len(reply) - 1, 0))]

    def _load(self, files: list[str]) -> tuple[FileIndex, list]:
        return self.store.load(files, passwords=self.passwords, on_progress=self.on_progress)

    def _ask_members(self, pieces: list[str], question: str, lang: str, ctx: RunContext) -> list[str]:
        """Every part's answer (in document order), members run `max_workers` at a time on threads (each
        stream read to its end); parts without an answer are left out. `ctx`: the run's context."""
        if not pieces:
            return []
        remaining = ctx.deadline - time.monotonic() if ctx.deadline is not None else None
        member = ParallelDocQAMember(llm=self.llm, generate_cfg=self.extra_generate_cfg, name="member")
        extra: dict[str, Any] = {"callbacks": ctx.callbacks} if ctx.callbacks else {}

        def ask(part: str) -> Any:  # (text, usage)
            sub = member.run([Message.unchecked(USER, question)], delta_stream=True, lang=lang, deadline=remaining,
                             part=part, question=question, **extra)  # fmt: skip
            try:
                reply = collect(sub)
                return (content_text(reply[-1].content) if reply else ""), sub.usage
            finally:
                sub.close()

        wait = run_batch([lambda p=p: ask(p) for p in pieces], self.max_workers)
        answers = []
        for i in range(len(pieces)):
            # run_batch is annotated for tool outcomes, but it returns what each call returned: here ask's tuple
            text, usage = cast("tuple[str, Usage]", wait(i))
            ctx.usage.merge(usage)
            answer = member_answer(text)
            if answer:
                answers.append(answer)
        logger.info("parallel doc QA: %d of %d parts held an answer", len(answers), len(pieces))
        return answers


def parts(index: FileIndex, max_tokens: int) -> list[str]:
    """The documents' chunks, consecutive ones of one file joined into parts of up to `max_tokens` tokens."""
    out: list[str] = []
    for entry in index.entries:
        texts: list[str] = []
        size = 0
        for chunk in entry.chunks:
            if texts and size + chunk.tokens > max_tokens:
                out.append(f"[{entry.source}]\n" + "\n".join(texts))
                texts, size = [], 0
            texts.append(chunk.text)
            size += chunk.tokens
        if texts:
            out.append(f"[{entry.source}]\n" + "\n".join(texts))
    return out


def member_answer(text: str) -> str:
    """A member's answer, or '' when it found none: JSON {"res", "content"} as asked, or plain text."""
    text = _FENCE.sub("", text.strip())
    try:
        data = parse_json(text)
    except ToolArgumentError:
        data = None
    if isinstance(data, dict) and "res" in data:
        content = data.get("content")
        if data["res"] != "ans" or not isinstance(content, str) or NO_ANSWER in content:
            return ""
        return content.strip()
    return "" if not text or NO_ANSWER in text else text


__all__ = ["ParallelDocQA", "ParallelDocQAMember", "member_answer", "parts"]
