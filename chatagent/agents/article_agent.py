"""ArticleAgent: writes from the user's files: continues their text, or (`full_article=True`) writes a whole
article on the title they give.

    bot = ArticleAgent(llm=cfg, files=['notes.pdf'])
    bot.run_nonstream([{'role': 'user', 'content': 'The bicycle was invented'}])                    # continues it
    bot.run_nonstream([{'role': 'user', 'content': 'History of the bicycle'}], full_article=True)   # a whole article

It finds the excerpts of the files that match the latest user message (as the Assistant does) and shows
them first (">\\n> Search for relevant information: \\n" and the excerpts, headed by their sources); then
it continues the text from them (after ">\\n> Writing Text: \\n"), or writes the article through the steps of
WriteFromScratch (summary, outline, sections).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.agents.assistant import Assistant
from chatagent.agents.file_excerpts import search_files
from chatagent.agents.write_from_scratch import HEADERS, write_article
from chatagent.schema import ASSISTANT, USER, Message
from chatagent.schema.fragment import fragment
from chatagent.tools.retrieval import allowed_files

FOUND = ">\n> Search for relevant information: \n{knowledge}\n"
CONTINUE = {
    "en": """You are a writing assistant. Continue the given text, following the references.
# References:
{ref_doc}

# Previous text:
{text}

Write the continuation directly: only the new text, without repeating the previous text or saying anything \
else, keeping it consistent with what came before.""",
    "zh": """你是一个写作助手，请依据参考资料，根据给定的前置文本续写合适的内容。
#参考资料：
{ref_doc}

#前置文本：
{text}

请直接开始续写，只输出续写的内容，不要重复前置文本，不要说无关的话，保证续写内容和前置文本保持连贯。""",
}


class ArticleAgent(Assistant):
    """Continues a text or writes an article from the user's files (see the module docstring)."""

    fragment_native = True  # _run yields fragments and requests

    def _run(
        self, messages: list[Message], lang: str = "en", full_article: bool = False, **kwargs: Any
    ) -> Iterator[list[Message]]:
        lang = lang if lang in CONTINUE else "en"
        files = allowed_files(self.files, messages)
        found = yield from self._blocking(
            search_files, self.store, files, messages, self._max_ref_tokens(self.llm), self.passwords, self.on_progress
        )
        knowledge = found.as_text()
        n = 0
        if knowledge:
            yield [fragment(Message.unchecked(ASSISTANT, FOUND.format(knowledge=knowledge)), n)]
            n += 1
        if full_article:
            return (yield from write_article(self, messages, knowledge, lang, start=n))
        yield [fragment(Message.unchecked(ASSISTANT, HEADERS["expand"]), n)]
        text = next((m.text for m in reversed(messages) if m.role == USER), "")
        prompt = CONTINUE[lang].format(ref_doc=knowledge, text=text)
        return (yield from self._call_llm([Message.unchecked(USER, prompt)], start=n + 1))


__all__ = ["ArticleAgent"]
