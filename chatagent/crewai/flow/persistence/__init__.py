"""`crewai.flow.persistence`: `@persist` (on a flow class or one of its methods) and where the state is kept.

    @persist()                                   # the default: flow_states.db in the project's storage folder
    class MyFlow(Flow[State]): ...
    @persist(SQLiteFlowPersistence("states.db"))  # a file of your own

The state is kept by chatagent's flow store (`chatagent.sessions.flow_states`) after every method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatagent.crewai.storage import storage_dir

PERSIST = "__crewai_persistence__"  # on a class or method decorated with @persist: its FlowPersistence


class FlowPersistence:
    """Where a flow's state is kept: `store`, a path or URL as chatagent's flow store takes."""

    def __init__(self, store: Any = None) -> None:
        self._store = store

    @property
    def store(self) -> Any:
        if self._store is None:
            return str(storage_dir() / "flow_states.db")
        return self._store


class SQLiteFlowPersistence(FlowPersistence):
    """States in a SQLite file (`db_path`; default: flow_states.db in the project's storage folder)."""

    def __init__(self, db_path: str | None = None) -> None:
        super().__init__(db_path)
        self.db_path = db_path


def persist(persistence: FlowPersistence | None = None, verbose: bool = False) -> Callable[[Any], Any]:
    """Keep the flow's state (see the module docstring)."""
    if isinstance(persistence, type) or callable(persistence) and not isinstance(persistence, FlowPersistence):
        raise TypeError("use @persist() (with parentheses), or @persist(SQLiteFlowPersistence(...))")

    def decorate(target: Any) -> Any:
        setattr(target, PERSIST, persistence or FlowPersistence())
        return target

    return decorate


__all__ = ["FlowPersistence", "PERSIST", "SQLiteFlowPersistence", "persist"]
