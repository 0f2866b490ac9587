"""`crewai.memory`: Memory (remember, recall), MemoryRecord, MemoryMatch."""

from chatagent.crewai.memory.types import MemoryMatch, MemoryRecord
from chatagent.crewai.memory.unified_memory import Memory

__all__ = ["Memory", "MemoryMatch", "MemoryRecord"]
