"""DialogueRetrievalAgent: answers in conversations longer than the model's window by searching them.

    bot = DialogueRetrievalAgent(llm=cfg)
    bot.run_nonstream(long_history + [{'role': 'user', 'content': 'What did we decide about the budget?'}])

The conversation before the latest message (and, when the latest message is long, its text apart from the
request in it) is written to a text file in the workspace (named by its content, so a conversation is written
and indexed once), and the request is answered as an Assistant answers from a file: from the excerpts that
match it best, cited. A latest message longer than MAX_QUERY_CHARS is first given to the model to pick out the
request (that call is not shown). System messages are kept as they are.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

from chatagent.agents.assistant import Assistant
from chatagent.llm.base import response_text
from chatagent.schema import SYSTEM, USER, ContentItem, Message
from chatagent.utils.workspace import workspace_dir

MAX_QUERY_CHARS = 1000
EXTRACT_QUERY_PROMPT = {
    "en": "<Given Text>\n{text}\n\nThe text above holds some material and a request from a user, usually at its "
    "beginning or its end. Print the user's request exactly as written, and nothing else; do not answer it.",
    "zh": "<给定文本>\n{text}\n\n上面的文本包括一段材料和一个用户请求，请求一般在最开头或最末尾。请原样打印出这个请求，不要回答它，"
    "也不要输出其他内容。",
}


class DialogueRetrievalAgent(Assistant):
    """An Assistant over its own conversation (see the module docstring)."""

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        if not messages or messages[-1].role != USER:
            raise ValueError("DialogueRetrievalAgent answers the latest user message: end the conversation with one")
        latest = messages[-1]
        text = latest.text
        history = [f"{m.role}: {_with_files(m)}" for m in messages[:-1] if m.role != SYSTEM]
        query = text
        if len(text) > MAX_QUERY_CHARS:
            head = (
                text if len(text) <= 2 * MAX_QUERY_CHARS else f"{text[:MAX_QUERY_CHARS]} ... {text[-MAX_QUERY_CHARS:]}"
            )
            ask = EXTRACT_QUERY_PROMPT.get(lang, EXTRACT_QUERY_PROMPT["en"]).format(text=head)
            query = (
                response_text((yield from self._call_llm([Message.unchecked(USER, ask)], hide=True))).strip() or head
            )
            history.append(text.replace(query, "") if query in text else text)
        items = [ContentItem(text=query)]
        if history:
            items.append(ContentItem(file=(yield from self._blocking(save_dialogue, "\n".join(history)))))
        if not isinstance(latest.content, str):
            items += [item for item in latest.content if item.kind != "text"]
        asked = [m for m in messages[:-1] if m.role == SYSTEM] + [latest.copy(content=items)]
        return (yield from super()._run(asked, lang=lang, **kwargs))


def save_dialogue(text: str) -> str:
    """Write `text` to the workspace under a name made from its content; the file's path."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    path = workspace_dir("dialogues") / f"dialogue_{digest}.txt"
    if not path.exists():
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(text, encoding="utf-8", errors="surrogatepass")
        tmp.replace(path)
    return str(path)


def _with_files(m: Message) -> str:
    """A message's text, with its files named."""
    if isinstance(m.content, str):
        return m.content
    return "\n".join(item.text if item.text is not None else f"[{item.kind}: {item.value}]" for item in m.content)


__all__ = ["DialogueRetrievalAgent", "save_dialogue"]
