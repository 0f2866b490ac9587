"""Facts drawn from a conversation by a chat model, merged with what is already remembered.

The model gets the conversation and the user's memories closest to it (by id) and answers with JSON:

    {"add": [{"text": "...", "importance": 0.8, "messages": [0, 2]}],
     "update": [{"id": "...", "text": "...", "importance": 0.9}],
     "delete": ["..."]}

A new fact that repeats or contradicts a memory updates it ("Alice moved to Lyon" replaces "Alice lives in
Paris") instead of piling up beside it. Ids the model invents, or that name another user's records, are ignored:
every change goes through the user's own LongTermMemory. A reply that is not such JSON stores nothing and is
logged; the conversation is then kept as raw turns, so nothing told is lost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from chatagent.memories.records import MemoryRecord
from chatagent.schema import ASSISTANT, USER, Message
from chatagent.utils.jsonlenient import ToolArgumentError, parse_json

if TYPE_CHECKING:
    from chatagent.memories.longterm import LongTermMemory

__all__ = ["EXTRACTION_PROMPT", "extract_and_consolidate"]

logger = logging.getLogger("chatagent.memories")

RELATED = 10  # existing memories shown to the model
EXTRACTION_PROMPT = """You keep a long-term memory of facts about the user: durable facts, preferences, plans, \
people and things they care about; not small talk, not what the assistant said unless the user agreed.

Memories already kept (id: text):
{memories}

Conversation (message number: role: text):
{conversation}

Answer with JSON only, in this form:
{{"add": [{{"text": "a short self-contained fact", "importance": 0.0-1.0, "messages": [numbers it came from]}}],
 "update": [{{"id": "id of a kept memory that the new facts repeat or contradict", "text": "the fact as it now \
stands", "importance": 0.0-1.0}}],
 "delete": ["id of a kept memory that is no longer true and has no replacement"]}}
Use empty lists when there is nothing to change."""


def extract_and_consolidate(
    memory: LongTermMemory, messages: list[Message], session_id: str | None, scope: str, first_index: int
) -> list[MemoryRecord]:
    """Ask `memory.llm` for the facts of `messages` and apply its additions, updates and deletions."""
    from chatagent.llm import get_chat_model

    turns = [(first_index + i, m) for i, m in enumerate(messages) if m.role in (USER, ASSISTANT) and m.text.strip()]
    if not turns:
        return []
    conversation = "\n".join(f"{i}: {m.role}: {m.text.strip()}" for i, m in turns)
    related = memory.recall(" ".join(m.text for _, m in turns if m.role == USER)[-2000:], k=RELATED)
    known = {m.record.id: m.record for m in related}
    listing = "\n".join(f"{r.id}: {r.text}" for r in known.values()) or "(none)"
    prompt = EXTRACTION_PROMPT.format(memories=listing, conversation=conversation)
    reply = get_chat_model(memory.llm).chat([Message(USER, prompt)], stream=False)
    plan = _plan(reply[-1].text if reply else "")
    if plan is None:
        logger.warning("the memory model's answer is not the JSON asked for; keeping the turns as they are")
        plain = memory.for_user(memory.user)
        plain_llm, plain.llm = plain.llm, None
        try:
            return plain.ingest(messages, session_id=session_id, scope=scope, first_index=first_index)
        finally:
            plain.llm = plain_llm
    numbers = {i for i, _ in turns}
    out: list[MemoryRecord] = []
    for item in plan.get("add") or []:
        fact = _fact(item)
        if fact is None:
            continue
        cited = [n for n in item.get("messages") or [] if isinstance(n, int) and n in numbers]
        source: dict[str, Any] = {"session": session_id, "messages": cited}
        out.append(memory.remember(fact[0], importance=fact[1], scope=scope, source=source))
    for item in plan.get("update") or []:
        fact = _fact(item)
        rid = item.get("id") if isinstance(item, dict) else None
        if fact is not None and rid in known and memory.update(rid, fact[0], importance=fact[1]):
            updated = memory.get(rid)
            if updated is not None:
                out.append(updated)
    for rid in plan.get("delete") or []:
        if rid in known:
            memory.forget(rid)
    return out


def _plan(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = parse_json(text[start : end + 1])
    except ToolArgumentError:
        return None
    return data if isinstance(data, dict) else None


def _fact(item: Any) -> tuple[str, float] | None:
    if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
        return None
    level = item.get("importance", 0.5)
    level = min(1.0, max(0.0, float(level))) if isinstance(level, (int, float)) else 0.5
    return item["text"].strip(), level
