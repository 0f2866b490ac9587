"""Facts drawn from a conversation by a chat model, merged with what is already remembered.

The model gets the conversation and the user's memories closest to it (by id) and answers with JSON:

    {"add": [{"text": "...", "importance": 0.8, "messages": [0, 2]}],
     "update": [{"id": "...", "text": "...", "importance": 0.9}],
     "delete": ["..."]}

A new fact that repeats or contradicts a memory updates it ("Alice moved to Lyon" replaces "Alice lives in
Paris") instead of piling up beside it. Ids the model invents, or that name another user's records, are ignored:
every change goes through the user's own LongTermMemory (`LongTermMemory.ingest` applies the plan). A reply that
is not such JSON changes nothing; the conversation is then kept as raw turns, so nothing told is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from chatagent.memories.records import MemoryRecord
from chatagent.schema import USER, Message
from chatagent.utils.jsonlenient import ToolArgumentError, parse_json

__all__ = ["EXTRACTION_PROMPT", "FactPlan", "ask_for_facts"]

logger = logging.getLogger("chatagent.memories")

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


@dataclass
class FactPlan:
    """What the model asked to change: facts to add (text, importance, message numbers), memories to update (id,
    text, importance) and to delete (ids); ids and numbers are only those it was shown."""

    add: list[tuple[str, float, list[int]]] = field(default_factory=list)
    update: list[tuple[str, str, float]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def ask_for_facts(llm: Any, turns: list[tuple[int, Message]], known: list[MemoryRecord]) -> FactPlan | None:
    """The model's plan for the conversation `turns` (message number, message) given the `known` memories; None
    when its answer is not the JSON asked for."""
    from chatagent.llm import get_chat_model  # the model layer's backends: with llm= only

    conversation = "\n".join(f"{i}: {m.role}: {m.text.strip()}" for i, m in turns)
    listing = "\n".join(f"{r.id}: {r.text}" for r in known) or "(none)"
    prompt = EXTRACTION_PROMPT.format(memories=listing, conversation=conversation)
    reply = get_chat_model(llm).chat([Message(USER, prompt)], stream=False)
    raw = _plan(reply[-1].text if reply else "")
    if raw is None:
        return None
    numbers, ids = {i for i, _ in turns}, {r.id for r in known}
    plan = FactPlan()
    for item in raw.get("add") or []:
        fact = _fact(item)
        if fact is not None:
            cited = [n for n in item.get("messages") or [] if isinstance(n, int) and n in numbers]
            plan.add.append((fact[0], fact[1], cited))
    for item in raw.get("update") or []:
        fact = _fact(item)
        if fact is not None and item.get("id") in ids:
            plan.update.append((item["id"], fact[0], fact[1]))
    plan.delete = [rid for rid in raw.get("delete") or [] if isinstance(rid, str) and rid in ids]
    return plan


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
