"""Memories in a model's input, and a finished turn into memory: what an agent given `memory=` does around a run.

Before the run, the records that best answer the latest user message are put at the start of that message,
labelled as memories from earlier conversations, each with its date, within a token budget (the best first,
as many as fit; the records of this very conversation are left out: the model has them). After the run, that
message is stored, cited by the conversation's session id and its place in it, and the final answer too when the
memory keeps answers and the answer says something (`chatagent.memories.boilerplate`; as less important: what
the user says about themselves matters most); with a model of its own the memory stores the facts it draws from
both instead.

A memory that fails (its store went away, its embedding service does not answer) costs the memories, not the
turn: the answer comes without them, or is not stored, with a warning in the log and a `progress` event whose
`error` says why and `data['memory']` what was lost ('recall' or 'store'), as for a file that cannot be read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from chatagent.errors import EmbedderError
from chatagent.memories.boilerplate import is_boilerplate
from chatagent.memories.store import MemoryStoreError
from chatagent.rag.progress import Progress
from chatagent.run.context import current_run
from chatagent.run.events import PROGRESS, Event, emit
from chatagent.schema import ASSISTANT, USER, ContentItem, Message

if TYPE_CHECKING:
    from chatagent.memories.longterm import LongTermMemory
    from chatagent.memories.records import MemoryMatch

__all__ = ["MEMORY_PROMPTS", "memory_block", "store_turn", "with_memories"]

logger = logging.getLogger("chatagent.memories")

MEMORY_FAILURES = (MemoryStoreError, EmbedderError)  # the world's failures a turn goes on without
LOST = {
    "recall": "answering without memories: the long-term memory could not be read",
    "store": "this turn is not stored in long-term memory: it could not be written",
}

RECALL_K = 8
ANSWER_IMPORTANCE = 0.3  # of an assistant's answer stored as a memory (a user's message: 0.5)
MEMORY_PROMPTS = {
    "en": "What you remember about me from earlier conversations (use it when it helps):",
    "zh": "你从之前的对话中记得的关于我的信息（有帮助时请使用）：",
}


def memory_block(matches: list[MemoryMatch], lang: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The memories as a labelled list, best first, within `max_tokens` (by `count`); '' when none fit."""
    head = MEMORY_PROMPTS["zh" if lang == "zh" else "en"]
    lines: list[str] = []
    used = count(head) + 2
    for m in matches:
        line = f"- [{m.record.date}] {' '.join(m.record.text.split())}"
        cost = count(line) + 1
        if used + cost > max_tokens:
            break
        lines.append(line)
        used += cost
    return head + "\n" + "\n".join(lines) if lines else ""


def with_memories(
    memory: LongTermMemory,
    messages: list[Message],
    lang: str,
    max_tokens: int,
    count: Callable[[str], int],
    session: str | None = None,
    agent: str | None = None,
    query: str | None = None,
) -> tuple[list[Message], str]:
    """`messages` whose latest user message starts with its memories, and that block ('' when none, or when the
    memory failed: see the module docstring; `agent` names who tells). The memories are those of `query`, by
    default that message's text (a caller that put excerpts before the question gives the question: its vector
    is then the one retrieval made). Records of `session` (this conversation, already in `messages`) are left out."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == USER), None)
    if last is None or max_tokens <= 0:
        return messages, ""
    query = (messages[last].text if query is None else query).strip()
    try:
        found = memory.recall(query, k=2 * RECALL_K) if query else []
    except MEMORY_FAILURES as e:
        _lost("recall", e, agent)
        return messages, ""
    found = [m for m in found if session is None or m.record.source.get("session") != session][:RECALL_K]
    block = memory_block(found, lang, max_tokens, count)
    if not block:
        return messages, ""
    out = list(messages)
    m = out[last]
    if isinstance(m.content, str):
        out[last] = m.copy(content=f"{block}\n\n{m.content}")
    else:
        out[last] = m.copy(content=[ContentItem(text=block + "\n\n"), *m.content])
    return out, block


def store_turn(
    memory: LongTermMemory,
    conversation: list[Message],
    response: list[Message],
    session: str | None,
    agent: str | None = None,
) -> int:
    """Store the latest user message of `conversation` (and the final answer of `response`: see the module
    docstring); how many records (0 when the memory failed)."""
    try:
        return _store_turn(memory, conversation, response, session)
    except MEMORY_FAILURES as e:
        _lost("store", e, agent)
        return 0


def _lost(what: str, error: Exception, agent: str | None) -> None:
    """Say in the log and to the run's callbacks that the memory failed and what the turn goes on without."""
    logger.warning("%s (%s: %s)", LOST[what], type(error).__name__, error)
    callbacks = current_run().callbacks
    if callbacks:
        text = LOST[what][0].upper() + LOST[what][1:]
        data = {"progress": Progress("failed", "long-term memory", 0, 0), "text": text, "memory": what}
        emit(callbacks, Event(PROGRESS, agent, error=f"{type(error).__name__}: {error}", data=data))


def _store_turn(
    memory: LongTermMemory, conversation: list[Message], response: list[Message], session: str | None
) -> int:
    last = next((i for i in range(len(conversation) - 1, -1, -1) if conversation[i].role == USER), None)
    if last is None:
        return 0
    turn = [conversation[last]]
    answer = next((m for m in reversed(response) if m.role == ASSISTANT and m.function_call is None), None)
    if answer is not None:
        turn.append(answer)
    # each message is cited where it is (or will be) in the stored conversation: the answer after the input
    where = len(conversation) + next(i for i, m in enumerate(response) if m is answer) if answer is not None else 0
    if memory.llm is not None and (answer is None or where == last + 1):  # the model sees question and answer
        return len(memory.ingest(turn, session_id=session, first_index=last))
    records = memory.ingest(turn[:1], session_id=session, first_index=last)
    if answer is not None and memory.keep_answers and not is_boilerplate(answer.text, conversation[last].text):
        records = records + memory.ingest(
            [answer], session_id=session, first_index=where, importance=ANSWER_IMPORTANCE, keep_answers=True
        )
    return len(records)
