"""The `remember` and `recall` tools: a tool-calling agent manages its long-term memory itself.

    from chatagent import FnCallAgent, LongTermMemory
    from chatagent.memories import memory_tools
    mem = LongTermMemory(user='alice')
    bot = FnCallAgent(llm=cfg, function_list=memory_tools(mem))

The tools act on the memory of the principal the run acts for (`chatagent.memories.context.run_memory`), like
`Assistant(memory=)`; a run that reaches no one's memory (a request of a server without keys outside a conversation)
gets an error saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chatagent.memories.context import run_memory
from chatagent.run.context import current_run
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool

if TYPE_CHECKING:
    from chatagent.memories.longterm import LongTermMemory

__all__ = ["RecallTool", "RememberTool", "memory_tools"]

NO_MEMORY = "Error: there is no long-term memory in this conversation (the server keeps none outside one)."


class _MemoryTool(BaseTool):
    def __init__(self, memory: LongTermMemory, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.memory = memory

    def _memory(self) -> LongTermMemory | None:
        return run_memory(self.memory)


class RememberTool(_MemoryTool):
    """Keep a fact about the user for later conversations."""

    name = "remember"
    description = (
        "Keep a fact about the user for later conversations: a preference, a plan, something about their life "
        "or work. Write it as a short self-contained sentence."
    )
    parameters = {
        "type": "object",
        "properties": {
            "fact": {"type": "string", "description": "The fact, as a short self-contained sentence."},
            "importance": {"type": "number", "description": "From 0 (trivia) to 1 (must never be forgotten)."},
        },
        "required": ["fact"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        args = self.parse_params(params)
        level = args.get("importance", 0.5)
        level = min(1.0, max(0.0, float(level))) if isinstance(level, (int, float)) else 0.5
        memory = self._memory()
        if memory is None:
            return NO_MEMORY
        session = current_run().session
        source = {"session": session.id} if session is not None else {}
        record = memory.remember(str(args["fact"]), importance=level, source=source)
        return f"Remembered (id {record.id})."


class RecallTool(_MemoryTool):
    """Search what is remembered about the user."""

    name = "recall"
    description = "Search what you remember about the user from earlier conversations. Returns dated memories."
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "k": {"type": "integer", "description": "How many memories at most (default 5)."},
        },
        "required": ["query"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        args = self.parse_params(params)
        k = args.get("k", 5)
        k = min(20, max(1, k)) if isinstance(k, int) else 5
        memory = self._memory()
        if memory is None:
            return NO_MEMORY
        found = memory.recall(str(args["query"]), k=k)
        if not found:
            return "Nothing remembered matches this query."
        return "\n".join(f"- [{m.record.date}] {m.record.text}" for m in found)


def memory_tools(memory: LongTermMemory) -> list[BaseTool]:
    """The `remember` and `recall` tools over `memory`, for an agent's `function_list`."""
    return [RememberTool(memory), RecallTool(memory)]
