"""`crewai.flow.human_feedback`: a flow method whose output a person reviews before the flow goes on.

    class Review(Flow):
        @start()
        def draft(self): return "a first draft"

        @human_feedback(message="Publish this?", emit=["approved", "rejected"], llm="gpt-4o-mini",
                        default_outcome="rejected")
        @listen(draft)
        def review(self, text): return text.upper()

        @listen("approved")
        def publish(self, result): return f"published: {result.output} ({result.feedback})"

The method runs, then the person's feedback on its output is asked for. Without `emit` the method's listeners are
given a `HumanFeedbackResult` (output, feedback, outcome, timestamp, method_name, metadata). With `emit` the
method is a router: the free-text feedback is classified by `llm` into one of the outcomes (no feedback:
`default_outcome`, else the first), whose listeners are given the result. Every result is kept in order on the
flow: `flow.human_feedback_history`, `flow.last_human_feedback`; a resumed flow has them too.

Where the feedback comes from: `provider=` (see `chatagent.crewai.flow.async_feedback`); without one, the terminal
(CrewAI's console prompt) when the flow runs for the machine's own user and its input is open, and otherwise (a
run that acts for a client of `chatagent serve`, a web UI visitor: `chatagent.run.trust`; a process whose input is
closed, as a worker's is) the flow pauses as `Flow.ask` pauses it, its question in the flow's record. A paused flow is kept in the flow store, owned by whom its run acts for, and goes on
with `MyFlow.from_pending(flow_id).resume(feedback)` in any process, for the same owner only; the method is not run
again (its output was kept with the question).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from chatagent.crewai.events import base_events as ev
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.flow.async_feedback import (
    ConsoleProvider,
    HumanFeedbackPending,
    HumanFeedbackProvider,
    PendingFeedbackContext,
)
from chatagent.crewai.llm import model_config
from chatagent.errors import ChatAgentError
from chatagent.llm.base import BaseChatModel
from chatagent.llm.registry import get_chat_model
from chatagent.run.context import current_trust
from chatagent.schema import USER, Message

F = TypeVar("F", bound=Callable[..., Any])
CONFIG = "__crewai_human_feedback__"  # on a decorated method: its HumanFeedbackConfig
REVIEWS = "reviews"  # in a flow's record: {invocation id: the output under review, its context, callback info}
HISTORY = "human_feedback"  # in a flow's record: the HumanFeedbackResults so far
COLLAPSE = (
    "A person reviewed some work and said:\n\n{feedback}\n\nWhich one of these outcomes does that mean: {outcomes}? "
    "Answer with that outcome only, exactly as written."
)


class LearnUnsupported(ChatAgentError, NotImplementedError):
    """`human_feedback(learn=True)`: CrewAI's lessons drawn from feedback are not carried over."""


@dataclass
class HumanFeedbackResult:
    """A person's feedback on a method's output, and the outcome it was classified as (with `emit`)."""

    output: Any
    feedback: str
    outcome: str | None = None
    timestamp: datetime = field(default_factory=datetime.now)
    method_name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> HumanFeedbackResult:
        stamp = data.get("timestamp")
        return cls(data.get("output"), str(data.get("feedback", "")), data.get("outcome"),
                   datetime.fromisoformat(stamp) if isinstance(stamp, str) else datetime.now(),
                   str(data.get("method_name", "")), dict(data.get("metadata") or {}))  # fmt: skip


RESULT_FIELDS = frozenset(f.name for f in dataclasses.fields(HumanFeedbackResult))


@dataclass
class HumanFeedbackConfig:
    """What `@human_feedback(...)` was given."""

    message: str
    emit: Sequence[str] | None = None
    llm: Any = "gpt-4o-mini"
    default_outcome: str | None = None
    metadata: dict[str, Any] | None = None
    provider: HumanFeedbackProvider | None = None


def human_feedback(
    message: str,
    emit: Sequence[str] | None = None,
    llm: Any = "gpt-4o-mini",
    default_outcome: str | None = None,
    metadata: dict[str, Any] | None = None,
    provider: HumanFeedbackProvider | None = None,
    learn: bool = False,
    learn_source: str = "hitl",
    learn_strict: bool = False,
) -> Callable[[F], F]:
    """Have a person review the method's output (see the module docstring)."""
    if not isinstance(message, str) or not message.strip():
        raise TypeError("human_feedback(message=...) is the text shown to the person")
    if emit is not None:
        if isinstance(emit, str) or not emit or not all(isinstance(e, str) and e for e in emit):
            raise ValueError("emit is a list of outcome labels, e.g. emit=['approved', 'rejected']")
        if not llm:
            raise ValueError("llm is required when emit is given: it classifies the feedback into an outcome")
        if default_outcome is not None and default_outcome not in emit:
            raise ValueError(f"default_outcome {default_outcome!r} must be one of the emit options: {list(emit)}")
    elif default_outcome is not None:
        raise ValueError("default_outcome requires emit to be specified")
    if provider is not None and not isinstance(provider, HumanFeedbackProvider):
        raise TypeError("provider has a request_feedback(context, flow) method (a HumanFeedbackProvider)")
    if learn:
        raise LearnUnsupported(
            "human_feedback(learn=True) is not supported by chatagent.crewai: keep lessons with flow.remember()"
        )
    config = HumanFeedbackConfig(message, list(emit) if emit else None, llm, default_outcome, metadata, provider)

    def decorate(fn: F) -> F:
        name = fn.__name__
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def reviewed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                inv = self._running_invocation()
                kept = (self._record.get(REVIEWS) or {}).get(str(inv["id"]))
                output = kept["output"] if kept is not None else await fn(self, *args, **kwargs)
                return await asyncio.to_thread(review, self, config, name, inv, output)

            wrapper: Any = reviewed_async
        else:

            @functools.wraps(fn)
            def reviewed(self: Any, *args: Any, **kwargs: Any) -> Any:
                inv = self._running_invocation()
                kept = (self._record.get(REVIEWS) or {}).get(str(inv["id"]))
                output = kept["output"] if kept is not None else fn(self, *args, **kwargs)
                return review(self, config, name, inv, output)

            wrapper = reviewed
        setattr(wrapper, CONFIG, config)
        return wrapper  # pyright: ignore[reportReturnType]

    return decorate


def review(flow: Any, config: HumanFeedbackConfig, method: str, inv: dict[str, Any], output: Any) -> Any:
    """The feedback on `output` of the running invocation `inv`: asked for, or (resumed) the answer given; what the
    method returns with it (its outcome with `emit`, else the HumanFeedbackResult)."""
    key, record = str(inv["id"]), flow._record
    reviews = record.setdefault(REVIEWS, {})
    if record["answers"].get(key):
        feedback = flow.ask(config.message)  # resumed: the answer given to resume()
    else:
        context = PendingFeedbackContext(flow.id, f"{type(flow).__module__}.{type(flow).__qualname__}", method,
                                         output, config.message, list(config.emit) if config.emit else None,
                                         config.default_outcome, dict(config.metadata or {}),
                                         _llm_name(config.llm))  # fmt: skip
        reviews[key] = {"output": output, "context": context.to_dict(), "callback_info": {}}
        provider = config.provider if config.provider is not None else _default_provider()
        crewai_event_bus.emit(flow, ev.HumanFeedbackRequestedEvent(flow_name=type(flow).__name__, method_name=method,
                                                                   output=output, message=config.message,
                                                                   emit=context.emit))  # fmt: skip
        try:
            if provider is None:
                raise HumanFeedbackPending(context)
            try:
                feedback = str(provider.request_feedback(context, flow))
            except EOFError:
                if config.provider is not None:
                    raise
                raise HumanFeedbackPending(context) from None  # no one at the terminal (a worker, a service): wait
        except HumanFeedbackPending as pending:
            reviews[key]["callback_info"] = pending.callback_info
            flow.persist = True  # a flow waiting for a person is kept, so that any process can resume it
            flow.ask(config.message)  # pauses (no answer yet): raised through the method
            raise RuntimeError("the flow did not pause for feedback") from None
    reviews.pop(key, None)
    result = HumanFeedbackResult(output, feedback, _outcome(config, feedback), method_name=method,
                                 metadata=dict(config.metadata or {}))  # fmt: skip
    crewai_event_bus.emit(flow, ev.HumanFeedbackReceivedEvent(flow_name=type(flow).__name__, method_name=method,
                                                              feedback=feedback, outcome=result.outcome))  # fmt: skip
    flow.human_feedback_history.append(result)
    record.setdefault(HISTORY, []).append(result)
    if config.emit:
        flow._given[key] = result
        return result.outcome
    return result


def _default_provider() -> HumanFeedbackProvider | None:
    """The terminal for the machine's own user; None (the flow pauses) for a run that acts for someone else."""
    trust = current_trust()
    return None if trust.shared or trust.principal is not None else ConsoleProvider()


def _outcome(config: HumanFeedbackConfig, feedback: str) -> str | None:
    """The outcome `feedback` means (with `emit`): classified by the config's model; no feedback: the default."""
    if not config.emit:
        return None
    emit = list(config.emit)
    fallback = config.default_outcome or emit[0]
    if not feedback.strip():
        return fallback
    said = _ask(config.llm, COLLAPSE.format(feedback=feedback, outcomes=", ".join(emit)))
    said = said.strip().strip("\"'`. ").lower()
    exact = [e for e in emit if e.lower() == said]
    if exact:
        return exact[0]
    named = sorted((e for e in emit if e.lower() in said), key=len, reverse=True)
    return named[0] if named else fallback


def _ask(spec: Any, prompt: str) -> str:
    """What the model `spec` (a model name, an LLM or any object with CrewAI's `.call()`, a chatagent model or its
    config) answers to `prompt`."""
    if isinstance(spec, (str, dict, BaseChatModel)):
        reply = get_chat_model(model_config(spec)).chat([Message(USER, prompt)], stream=False)
        return reply[-1].text if reply else ""
    if not callable(getattr(spec, "call", None)):
        raise TypeError(f"human_feedback(llm=...) is a model name or an LLM with .call(), got {type(spec).__name__}")
    return str(spec.call([{"role": "user", "content": prompt}]))


def _llm_name(spec: Any) -> str | None:
    return spec if isinstance(spec, str) or spec is None else str(getattr(spec, "model", type(spec).__name__))


__all__ = ["HumanFeedbackConfig", "HumanFeedbackResult", "LearnUnsupported", "human_feedback"]
