"""WriteFromScratch: writes an article from reference material: a summary, an outline, then each section.

    bot = WriteFromScratch(llm=cfg)
    bot.run_nonstream([{'role': 'user', 'content': 'The history of the bicycle'}], knowledge=notes)

The response is a sequence of messages, each step headed by a short message of its own as Qwen-Agent writes
them (">\\n> Summarize Browse Content: \\n", ">\\n> Generate Outline: \\n", ">\\n> Writing Text: \\n", then
">\\n# " before each section): the summary of `knowledge`, an outline whose first-level headings are Roman
numerals, and one expansion per heading, each streamed as it is written. The latest user message is the title.
ArticleAgent uses the same steps with excerpts it finds in the user's files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.schema import ASSISTANT, SYSTEM, USER, Message
from chatagent.schema.fragment import fragment

DEFAULT_PLAN = '{"action1": "summarize", "action2": "outline", "action3": "expand"}'
HEADERS = {
    "plan": f">\n> Use Default plans: \n{DEFAULT_PLAN}",
    "summarize": ">\n> Summarize Browse Content: \n",
    "outline": ">\n> Generate Outline: \n",
    "expand": ">\n> Writing Text: \n",
    "section": ">\n# ",
}
SUMMARIZE = {"en": "Summarize the main content of the reference materials.", "zh": "总结参考资料的主要内容。"}
KNOWLEDGE = {"en": "# Reference materials\n\n{knowledge}", "zh": "# 参考资料\n\n{knowledge}"}
OUTLINE = {
    "en": """You are a writing assistant. Your task is to write an article from reference materials.
# References:
{ref_doc}

The title is: {title}

First give the outline of the article, and only the outline. Number its first-level headings with Roman \
numerals (I., II., ...). Write only from the references; bring in no other knowledge.""",
    "zh": """你是一个写作助手，任务是充分理解参考资料，从而完成写作。
#参考资料：
{ref_doc}

写作标题是：{title}

请先列出大纲，回复只需包含大纲。大纲的一级标题全部以罗马数字（I.、II.、……）计数。只依据给定的参考资料来写，不要引入其余知识。""",
}
EXPAND = {
    "en": """You are a writing assistant. Your task is to write an article from reference materials.
# References:
{ref_doc}

The title is: {title}
The outline is:
{outline}

Now write the chapter of first-level heading number {index}: {heading}. Each chapter covers its own part, so do \
not cover what later chapters will. Do not write an outline here. Write only from the references.{stop_at}""",
    "zh": """你是一个写作助手，任务是依据参考资料完成写作。
#参考资料：
{ref_doc}

写作标题是：{title}
大纲是：
{outline}

现在请扩写第{index}个一级标题对应的章节：{heading}。每个章节负责不同的内容，不需要涵盖之后的内容。不要在这里生成大纲。\
只依据给定的参考资料来写。{stop_at}""",
}
STOP_AT = {"en": " Stop before writing {heading}.", "zh": "写到 {heading} 时停止。"}
_ROMAN = re.compile(r"^\s*[IVXLCDM]+\b")


class WriteFromScratch(Agent):
    """Summary, outline, sections (see the module docstring)."""

    fragment_native = True  # _run yields fragments and requests

    def _run(
        self, messages: list[Message], lang: str = "en", knowledge: str = "", **kwargs: Any
    ) -> Iterator[list[Message]]:
        return (yield from write_article(self, messages, knowledge, lang))


def write_article(agent: Agent, messages: list[Message], knowledge: str, lang: str, start: int = 0) -> Iterator:
    """The steps of WriteFromScratch, as `agent`'s model calls; messages placed from `start`; returns how many."""
    lang = lang if lang in OUTLINE else "en"
    title = next((m.text for m in reversed(messages) if m.role == USER), "")
    n = start

    def header(kind: str) -> list[Message]:
        nonlocal n
        n += 1
        return [fragment(Message.unchecked(ASSISTANT, HEADERS[kind]), n - 1)]

    def ask(prompt: str, system: str | None = None) -> Iterator:
        nonlocal n
        msgs = ([Message.unchecked(SYSTEM, system)] if system else []) + [Message.unchecked(USER, prompt)]
        reply = yield from agent._call_llm(msgs, start=n)
        n += len(reply)
        return "".join(m.text for m in reply if m.function_call is None)

    yield header("plan")
    yield header("summarize")
    summary = yield from ask(SUMMARIZE[lang], KNOWLEDGE[lang].format(knowledge=knowledge) if knowledge else None)
    yield header("outline")
    outline = yield from ask(OUTLINE[lang].format(ref_doc=summary, title=title))
    yield header("expand")
    headings = [line.strip() for line in outline.split("\n") if _ROMAN.match(line)]
    for i, heading in enumerate(headings):
        yield header("section")
        nxt = headings[i + 1] if i + 1 < len(headings) else None
        stop_at = STOP_AT[lang].format(heading=nxt) if nxt else ""
        prompt = EXPAND[lang].format(
            ref_doc=knowledge, title=title, outline=outline, index=i + 1, heading=heading, stop_at=stop_at
        )
        yield from ask(prompt)
    return n - start


__all__ = ["WriteFromScratch", "write_article"]
