"""Runnable: what the run machinery needs of an agent, the whole contract between them.

Nothing under `chatagent.run` knows `chatagent.Agent`: it starts, controls and drives any object with these members,
and plugin hooks are typed against it. `Agent` implements it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel
    from chatagent.run.compaction import Compaction
    from chatagent.run.events import Callback
    from chatagent.run.requests import AgentLoop
    from chatagent.schema import Message
    from chatagent.tools.calling import ToolCache
    from chatagent.tools.tool import BaseTool


#: `run_plugins(response_format=UNSET)`: the agent's own response format (None: none, for this run)
UNSET: Any = object()


class Runnable(Protocol):
    """An agent as the run machinery sees it."""

    @property
    def name(self) -> str | None:
        """How events, traces and other agents name it; put on the messages it shows."""
        ...

    @property
    def async_safe(self) -> bool:
        """Whether its loop never blocks (all its waiting goes through requests): `arun()` then steps the loop on the
        event loop itself, else in a worker thread."""
        ...

    @property
    def callbacks(self) -> tuple[Callback, ...]:
        """Its own callbacks (see `chatagent.run.events`), told about every run of it."""
        ...

    @property
    def llm(self) -> BaseChatModel:
        """The model its loop asks."""
        ...

    @property
    def system_message(self) -> str | None:
        """Put before the conversation by its loop (the room it takes counts against the model's window)."""
        ...

    @property
    def compaction(self) -> Compaction:
        """What a run does with a conversation that outgrew the model's window (`chatagent.run.compaction`)."""
        ...

    @property
    def extra_generate_cfg(self) -> dict[str, Any]:
        """Generation settings for its model calls, over the model's own."""
        ...

    @property
    def function_map(self) -> Mapping[str, BaseTool]:
        """Its tools by name."""
        ...

    @property
    def tool_cache(self) -> ToolCache | None:
        """Where its `cache=True` tools keep results (None without tools)."""
        ...

    @property
    def model_built(self) -> bool:
        """Whether `llm` is built yet (`arun()` builds it in a worker thread first: a first build imports a backend)."""
        ...

    def tools_need_approval(self) -> bool:
        """Whether a call of one of its tools may pause a run for a person's approval."""
        ...

    def run_plugins(self, extra: Iterable[Any] | None = None, response_format: Any = UNSET) -> Sequence[Any]:
        """The plugin objects of one run: its own, then `extra`, then the check of `response_format` (its own when
        UNSET)."""
        ...

    def loop(self, messages: list[Message], lang: str, kwargs: dict[str, Any]) -> AgentLoop:
        """Its loop on the conversation (its system message merged): a generator of fragments and requests (see
        `chatagent.run.requests`) that is sent each request's result."""
        ...


__all__ = ["UNSET", "Runnable"]
