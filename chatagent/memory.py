"""Qwen-Agent's `qwen_agent.memory` path: the file-RAG `Memory` agent (see `chatagent.agents.memory`)."""

from chatagent.agents.memory import Memory

__all__ = ["Memory"]
