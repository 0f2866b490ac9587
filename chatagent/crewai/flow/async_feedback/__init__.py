"""`crewai.flow.async_feedback`: how a `@human_feedback` method gets its feedback, and a paused flow's context.

    class Tickets(HumanFeedbackProvider):
        def request_feedback(self, context, flow):
            open_ticket(context.flow_id, context.method_output)
            raise HumanFeedbackPending(context=context, callback_info={"ticket": 7})   # the flow pauses

`kickoff()` then returns that `HumanFeedbackPending` (its `context`: a `PendingFeedbackContext`); the flow is kept
in the flow store, and `MyFlow.from_pending(flow_id).resume(feedback)` goes on with it, in any process. A provider
that returns a text gives the feedback at once (`ConsoleProvider`: the person at the terminal types it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from chatagent.errors import ChatAgentError


@dataclass
class PendingFeedbackContext:
    """What a flow paused for feedback waits on: the flow, the method, the output shown, the message, the outcomes."""

    flow_id: str
    flow_class: str
    method_name: str
    method_output: Any
    message: str
    emit: list[str] | None = None
    default_outcome: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    llm: str | None = None
    requested_at: datetime = field(default_factory=datetime.now)

    def to_dict(self) -> dict[str, Any]:
        """The context as JSON data (the output and metadata as plain data, else their text)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["method_output"], out["metadata"] = _plain(self.method_output), _plain(self.metadata)
        out["requested_at"] = self.requested_at.isoformat()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingFeedbackContext:
        """The context `to_dict` gave."""
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}
        if isinstance(fields.get("requested_at"), str):
            fields["requested_at"] = datetime.fromisoformat(fields["requested_at"])
        return cls(**fields)


class HumanFeedbackPending(ChatAgentError):  # noqa: N818 (CrewAI's name: a provider raises it to pause the flow)
    """Raised by a provider to pause the flow until feedback comes; what `kickoff()` returns when it paused."""

    def __init__(self, context: PendingFeedbackContext, callback_info: dict[str, Any] | None = None,
                 message: str | None = None) -> None:  # fmt: skip
        self.context = context
        self.callback_info = dict(callback_info or {})
        super().__init__(message or f"flow {context.flow_id!r} waits for feedback on {context.method_name}")


@runtime_checkable
class HumanFeedbackProvider(Protocol):
    """Gets a person's feedback on a method's output: returns it, or raises `HumanFeedbackPending` to pause."""

    def request_feedback(self, context: PendingFeedbackContext, flow: Any) -> str: ...


class ConsoleProvider:
    """The feedback typed at the terminal (what CrewAI asks by default; see docs/crewai.md for chatagent's default)."""

    def __init__(self, verbose: bool = True) -> None:
        self.verbose = verbose

    def request_feedback(self, context: PendingFeedbackContext, flow: Any) -> str:
        if self.verbose:
            print(f"\n{'=' * 50}\n  OUTPUT FOR REVIEW\n{'=' * 50}\n{context.method_output}\n{'=' * 50}\n")
        print(f"{context.message}\n(Press Enter to skip, or type your feedback)\n")
        return input("Your feedback: ").strip()


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    return str(value)


__all__ = ["ConsoleProvider", "HumanFeedbackPending", "HumanFeedbackProvider", "PendingFeedbackContext"]
