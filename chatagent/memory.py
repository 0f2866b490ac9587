"""Qwen-Agent's `qwen_agent.memory` path: its `Memory` agent, chatagent's `FileExcerpts` (the excerpts of a
conversation's files; see `chatagent.agents.file_excerpts`). Long-term memory is `chatagent.memories`."""

from chatagent.agents.file_excerpts import Memory

__all__ = ["Memory"]
